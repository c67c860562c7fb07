// Checks deploy/kserve offline: the ServingRuntime and InferenceService against KServe's own
// CRD schemas (kserve_crds/, the CRDs as KServe publishes them, gzipped), then what the
// schemas cannot know: the runtime speaks grpc-v2 on a port named h2c that is placerd's
// --listen port, probes are gRPC health checks on it, it takes Hugging Face checkpoints, the
// InferenceService picks this runtime with a format and protocol it supports, and the real
// placerd accepts the container's arguments.
//
//   node validate_kserve.mjs SOURCE_DIR PLACERD
//
// Exits 0 when all holds, 1 listing every failure.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import YAML from "yaml";
// ajv comes with kubernetes-models' validator (package-lock.json pins it).
import Ajv from "ajv";

const [sourceDir, placerd] = process.argv.slice(2);
if (!sourceDir || !placerd) {
  console.error("usage: node validate_kserve.mjs SOURCE_DIR PLACERD");
  process.exit(2);
}

const failures = [];
function check(condition, what) {
  if (!condition) failures.push(what);
  return condition;
}

// The served version's openAPIV3Schema of a CRD, for its kind.
function crdSchema(file) {
  const crd = YAML.parse(zlib.gunzipSync(fs.readFileSync(file)).toString("utf8"));
  const version = crd.spec.versions.find((v) => v.served && v.storage);
  return {
    kind: crd.spec.names.kind,
    apiVersion: `${crd.spec.group}/${version.name}`,
    schema: version.schema.openAPIV3Schema,
  };
}

// The structure and types are the point; OpenAPI's formats (int32, int64, byte) are not ajv's.
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
// Kubernetes' extensions to OpenAPI: int-or-string accepts either, the rest only annotate.
ajv.addKeyword({
  keyword: "x-kubernetes-int-or-string",
  modifying: false,
  validate: () => true,
});
function intOrString(schema) {
  if (schema && typeof schema === "object") {
    if (schema["x-kubernetes-int-or-string"]) {
      delete schema.type;
      schema.anyOf = [{ type: "integer" }, { type: "string" }];
    }
    for (const value of Object.values(schema)) intOrString(value);
  }
  return schema;
}
const validators = {};
const crdDir = path.join(sourceDir, "tests", "deploy", "kserve_crds");
for (const file of fs.readdirSync(crdDir).filter((f) => f.endsWith(".yaml.gz"))) {
  const { kind, apiVersion, schema } = crdSchema(path.join(crdDir, file));
  validators[`${apiVersion} ${kind}`] = ajv.compile(intOrString(schema));
}

const dir = path.join(sourceDir, "deploy", "kserve");
const objects = {};
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
  for (const doc of YAML.parseAllDocuments(fs.readFileSync(path.join(dir, file), "utf8"))) {
    const object = doc.toJS();
    const where = `${file}: ${object.kind}/${object.metadata?.name}`;
    const validate = validators[`${object.apiVersion} ${object.kind}`];
    if (!check(validate, `${where}: no KServe schema for ${object.apiVersion} ${object.kind}`)) {
      continue;
    }
    if (!validate(object)) {
      failures.push(`${where}: ${ajv.errorsText(validate.errors, { separator: "; " })}`);
    }
    objects[object.kind] = object;
  }
}

const runtime = objects.ServingRuntime;
const service = objects.InferenceService;
if (check(runtime, "deploy/kserve: no ServingRuntime") &&
    check(service, "deploy/kserve: no InferenceService")) {
  check(runtime.spec.protocolVersions?.includes("grpc-v2"), "ServingRuntime: protocolVersions must include grpc-v2");
  check(runtime.spec.supportedModelFormats?.some((f) => f.name === "huggingface"),
        "ServingRuntime: supportedModelFormats must include huggingface");
  const [container] = runtime.spec.containers;
  check(container.name === "kserve-container", "ServingRuntime: KServe needs the container named kserve-container");
  const args = container.args ?? [];
  const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.split("=").slice(1).join("=");
  const listen = flag("listen");
  const h2c = container.ports?.find((p) => p.name === "h2c");
  check(h2c && listen && Number(listen.slice(listen.lastIndexOf(":") + 1)) === h2c.containerPort,
        `ServingRuntime: the port named h2c must be placerd's --listen port (${listen})`);
  check(flag("model") === "/mnt/models", "ServingRuntime: --model must be /mnt/models, where KServe puts the model");
  check(flag("model-name") === "{{.Name}}", "ServingRuntime: --model-name must be the InferenceService's name");
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    check(container[probe]?.grpc?.port === h2c?.containerPort,
          `ServingRuntime: ${probe} must be a gRPC health probe on the h2c port`);
  }
  check(container.startupProbe.periodSeconds * container.startupProbe.failureThreshold >= 15 * 60,
        "ServingRuntime: the startup probe must allow big models at least 15 minutes to load");

  const model = service.spec.predictor.model;
  check(model.runtime === runtime.metadata.name, "InferenceService: must name the placer runtime");
  check(runtime.spec.supportedModelFormats.some((f) => f.name === model.modelFormat.name),
        "InferenceService: its modelFormat must be one the runtime supports");
  check(runtime.spec.protocolVersions.includes(model.protocolVersion),
        "InferenceService: its protocolVersion must be one the runtime speaks");

  // The real placerd on the container's arguments, on free loopback ports: past flag parsing
  // (exit 2 is a flag error) to the missing /mnt/models (exit 1).
  const local = args.map((a) => a.replace("{{.Name}}", service.metadata.name))
      .filter((a) => !a.startsWith("--listen=") && !a.startsWith("--metrics-listen="));
  const run = spawnSync(placerd, [...local, "--listen=127.0.0.1:0", "--metrics-listen", ""],
                        { encoding: "utf8", timeout: 60000 });
  const output = `${run.stdout}${run.stderr}`;
  check(run.status === 1 && output.includes("/mnt/models"),
        `ServingRuntime: placerd should accept every argument and stop at the missing ` +
        `/mnt/models, got exit ${run.status}: ${output.trim()}`);
}

if (failures.length > 0) {
  console.error(`${failures.length} problem(s):\n  ${failures.join("\n  ")}`);
  process.exit(1);
}
console.log("deploy/kserve: valid against KServe's CRDs; runtime, probes and flags consistent");
