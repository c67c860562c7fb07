// Renders deploy/k8s with `kubectl kustomize` (the base, and the production overlay with
// throw-away secrets) and checks every object offline against the Kubernetes and
// prometheus-operator schemas (kubernetes-models), then what the schemas cannot know:
// probes, grace period, security context, ports and sizes agree with placerd's own flags.
//
//   node validate_k8s.mjs SOURCE_DIR KUBECTL PLACERD
//
// Exits 0 when all holds, 1 listing every failure.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import YAML from "yaml";

import * as appsV1 from "kubernetes-models/apps/v1";
import * as coreV1 from "kubernetes-models/v1";
import * as policyV1 from "kubernetes-models/policy/v1";
import * as autoscalingV2 from "kubernetes-models/autoscaling/v2";
import * as monitoringV1 from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const [sourceDir, kubectl, placerd] = process.argv.slice(2);
if (!sourceDir || !kubectl || !placerd) {
  console.error("usage: node validate_k8s.mjs SOURCE_DIR KUBECTL PLACERD");
  process.exit(2);
}

const models = {
  "apps/v1": appsV1,
  v1: coreV1,
  "policy/v1": policyV1,
  "autoscaling/v2": autoscalingV2,
  "monitoring.coreos.com/v1": monitoringV1,
};

const failures = [];
function check(condition, what) {
  if (!condition) failures.push(what);
  return condition;
}

function render(dir) {
  const text = execFileSync(kubectl, ["kustomize", dir], { encoding: "utf8" });
  return YAML.parseAllDocuments(text).map((doc) => doc.toJS());
}

// placerd.toml: `key = value` lines (strings quoted), as CLI11 reads them.
function parseFlags(toml) {
  const flags = {};
  for (const raw of toml.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    const value = line.slice(eq + 1).trim();
    flags[line.slice(0, eq).trim()] = value.startsWith('"') ? JSON.parse(value) : value;
  }
  return flags;
}

function seconds(duration) {
  const match = /^([0-9.]+)(ms|s|m|h)?$/.exec(duration);
  if (!match) return NaN;
  const scale = { ms: 0.001, s: 1, m: 60, h: 3600 }[match[2] ?? "s"];
  return Number(match[1]) * scale;
}

function bytes(quantity) {
  const match = /^([0-9.]+)\s*(Ki|Mi|Gi|Ti|KiB|MiB|GiB|TiB)?$/.exec(quantity);
  if (!match) return NaN;
  const unit = (match[2] ?? "").replace("B", "");
  return Number(match[1]) * ({ "": 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 }[unit]);
}

function port(address) {
  return Number(address.slice(address.lastIndexOf(":") + 1));
}

function matches(selector, labels) {
  return Object.entries(selector ?? {}).every(([key, value]) => labels?.[key] === value);
}

function validateSchemas(label, objects) {
  for (const object of objects) {
    const where = `${label}: ${object.kind}/${object.metadata?.name}`;
    const Model = models[object.apiVersion]?.[object.kind];
    if (!check(Model, `${where}: no schema for ${object.apiVersion} ${object.kind}`)) continue;
    // kustomize's secretGenerator folds long base64 values over lines, which the API server
    // decodes (Go's base64 skips newlines) but the schema's strict "byte" format does not.
    const normalized = object.kind === "Secret" && object.data
      ? { ...object, data: Object.fromEntries(Object.entries(object.data)
          .map(([key, value]) => [key, value.replace(/\s+/g, "")])) }
      : object;
    try {
      new Model(normalized).validate();
    } catch (error) {
      failures.push(`${where}: ${error.message}`);
    }
  }
}

// Runs the real placerd on the ConfigMap's flags: it must get past flag parsing (exit 2 is a
// flag error) and stop at the first missing file of the pod (exit 1).
function checkPlacerdAcceptsFlags(label, toml) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "placer-k8s-flags-"));
  const file = path.join(dir, "placerd.toml");
  fs.writeFileSync(file, toml);
  const run = spawnSync(
    placerd,
    ["--config", file, "--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0",
     "--metrics-listen", ""],
    { encoding: "utf8", timeout: 60000 });
  fs.rmSync(dir, { recursive: true, force: true });
  const output = `${run.stdout}${run.stderr}`;
  check(run.status === 1 && output.includes("/etc/placer/tls/tls.crt"),
        `${label}: placerd should accept every flag of placerd.toml and stop at the missing ` +
        `TLS file, got exit ${run.status}: ${output.trim()}`);
}

function checkObjects(label, objects) {
  const byKind = (kind) => objects.filter((o) => o.kind === kind);
  const [deployment] = byKind("Deployment");
  if (!check(deployment, `${label}: no Deployment`)) return;
  const pod = deployment.spec.template.spec;
  const [container] = pod.containers;
  const configVolume = pod.volumes.find((v) => v.configMap);
  const configMap = byKind("ConfigMap").find((c) => c.metadata.name === configVolume?.configMap.name);
  if (!check(configMap, `${label}: the Deployment's ConfigMap volume names no rendered ConfigMap`)) return;
  const toml = configMap.data["placerd.toml"];
  const flags = parseFlags(toml);
  check(container.args.join(" ").includes("--config"), `${label}: placerd is not given --config`);
  const mount = container.volumeMounts.find((m) => m.name === configVolume.name);
  check(container.args.includes(`${mount?.mountPath}/placerd.toml`),
        `${label}: --config does not point at the mounted placerd.toml`);
  checkPlacerdAcceptsFlags(label, toml);

  // Draining needs drain-timeout, then up to 5 s for cancelled streams and 1 s to flush.
  const drain = seconds(flags["drain-timeout"] ?? "30s");
  check(pod.terminationGracePeriodSeconds > drain + 6,
        `${label}: terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} must ` +
        `exceed drain-timeout ${drain}s + 6s`);

  const ports = Object.fromEntries(container.ports.map((p) => [p.name, p.containerPort]));
  check(flags["health-listen"] && ports.health === port(flags["health-listen"]),
        `${label}: containerPort "health" must be placerd's --health-listen port`);
  check(ports.grpc === port(flags.listen), `${label}: containerPort "grpc" must be --listen's port`);
  check(ports.metrics === port(flags["metrics-listen"]),
        `${label}: containerPort "metrics" must be --metrics-listen's port`);
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const grpc = container[probe]?.grpc;
    check(grpc && grpc.port === ports.health,
          `${label}: ${probe} must be a gRPC health probe on the health port ${ports.health}`);
    check(!container[probe]?.httpGet && !container[probe]?.exec, `${label}: ${probe} is not native gRPC`);
  }
  const startup = container.startupProbe;
  check(startup.periodSeconds * startup.failureThreshold >= 15 * 60,
        `${label}: the startup probe must allow big models at least 15 minutes to load`);

  check(pod.securityContext?.runAsNonRoot === true, `${label}: pod must set runAsNonRoot`);
  check(pod.securityContext?.runAsUser > 0, `${label}: pod must run as a non-zero uid`);
  check(container.securityContext?.readOnlyRootFilesystem === true,
        `${label}: the root filesystem must be read-only`);
  check(container.securityContext?.allowPrivilegeEscalation === false,
        `${label}: privilege escalation must be off`);
  for (const dir of ["/tmp", flags["offload-dir"]]) {
    check(container.volumeMounts.some((m) => m.mountPath === dir && !m.readOnly),
          `${label}: ${dir} needs a writable volume (the root filesystem is read-only)`);
  }
  const modelMount = container.volumeMounts.find((m) => m.mountPath === flags.model);
  const modelVolume = pod.volumes.find((v) => v.name === modelMount?.name);
  check(modelVolume?.persistentVolumeClaim || modelVolume?.image,
        `${label}: --model ${flags.model} must be a PersistentVolumeClaim or image volume`);
  for (const [flag, file] of [["tls-cert"], ["tls-key"], ["auth-token-file"]].map(([f]) => [f, flags[f]])) {
    const secretMount = container.volumeMounts.find((m) => file?.startsWith(`${m.mountPath}/`));
    const volume = pod.volumes.find((v) => v.name === secretMount?.name);
    check(volume?.secret, `${label}: --${flag} ${file} must come from a Secret volume`);
  }

  const gpus = container.resources.limits?.["nvidia.com/gpu"];
  check(gpus >= 1 && container.resources.requests?.["nvidia.com/gpu"] === gpus,
        `${label}: nvidia.com/gpu must be requested and limited alike`);
  // With --max-memory, a GPU it does not name gets no weights (Accelerate's rule).
  const gpuBudgets = (flags["max-memory"] ?? "").split(",").filter((e) => /^(cuda:)?[0-9]+=/.test(e));
  check(!flags["max-memory"] || gpuBudgets.length === gpus,
        `${label}: max-memory names ${gpuBudgets.length} GPU(s) but the pod gets ${gpus}`);
  const cpuBudget = /(?:^|,)cpu=([^,]+)/.exec(flags["max-memory"] ?? "");
  if (check(cpuBudget, `${label}: max-memory must fix the cpu budget so the pod can be sized`)) {
    check(bytes(container.resources.requests.memory) >= bytes(cpuBudget[1]) + 2 ** 30,
          `${label}: memory request ${container.resources.requests.memory} must cover the cpu ` +
          `budget ${cpuBudget[1]} plus at least 1 GiB`);
  }

  const podLabels = deployment.spec.template.metadata.labels;
  check(matches(deployment.spec.selector.matchLabels, podLabels), `${label}: Deployment selector`);
  const [service] = byKind("Service");
  check(service && matches(service.spec.selector, podLabels) &&
        Object.keys(service.spec.selector).length > 0, `${label}: Service must select the pods`);
  const servicePorts = Object.fromEntries(service.spec.ports.map((p) => [p.name, p.targetPort]));
  check(servicePorts.grpc === "grpc" && servicePorts.metrics === "metrics",
        `${label}: Service must expose the grpc and metrics ports`);
  const [monitor] = byKind("ServiceMonitor");
  check(monitor && matches(monitor.spec.selector.matchLabels, service.metadata.labels),
        `${label}: ServiceMonitor must select the Service`);
  check(monitor?.spec.endpoints.every((e) => e.port in servicePorts && e.path === "/metrics"),
        `${label}: ServiceMonitor must scrape the Service's metrics port`);
  const [budget] = byKind("PodDisruptionBudget");
  check(budget && matches(budget.spec.selector.matchLabels, podLabels) &&
        Object.keys(budget.spec.selector.matchLabels).length > 0,
        `${label}: PodDisruptionBudget must select the pods`);
  return { deployment, pod };
}

function makeSecrets(dir) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokens"), "# test token\nk8s-test-token\n");
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=placer",
    "-keyout", path.join(dir, "tls.key"), "-out", path.join(dir, "tls.crt")],
  { stdio: "ignore" });
}

const k8s = path.join(sourceDir, "deploy", "k8s");
const base = render(k8s);
console.log(`base: ${base.map((o) => o.kind).join(", ")}`);
validateSchemas("base", base);
checkObjects("base", base);
for (const kind of ["Deployment", "Service", "ConfigMap", "ServiceMonitor", "PodDisruptionBudget",
                    "PersistentVolumeClaim"]) {
  check(base.some((o) => o.kind === kind), `base: no ${kind}`);
}

const copy = fs.mkdtempSync(path.join(os.tmpdir(), "placer-k8s-"));
try {
  fs.cpSync(k8s, copy, { recursive: true });
  makeSecrets(path.join(copy, "overlays", "production", "secrets"));
  const production = render(path.join(copy, "overlays", "production"));
  console.log(`production: ${production.map((o) => o.kind).join(", ")}`);
  validateSchemas("production", production);
  const checked = checkObjects("production", production);
  for (const object of production) {
    if (object.kind !== "Namespace") {
      check(object.metadata.namespace === "placer", `production: ${object.kind} not in namespace placer`);
    }
  }
  const secrets = production.filter((o) => o.kind === "Secret");
  const tokens = secrets.find((s) => s.metadata.name.startsWith("placer-auth-tokens"));
  const tls = secrets.find((s) => s.metadata.name.startsWith("placer-tls"));
  check(tokens?.data?.tokens, "production: no generated token Secret with key 'tokens'");
  check(tls?.type === "kubernetes.io/tls" && tls.data["tls.crt"] && tls.data["tls.key"],
        "production: no generated kubernetes.io/tls Secret");
  if (checked) {
    const secretNames = checked.pod.volumes.filter((v) => v.secret).map((v) => v.secret.secretName);
    check(secretNames.includes(tokens?.metadata.name) && secretNames.includes(tls?.metadata.name),
          `production: the Deployment must mount the generated Secrets, mounts ${secretNames}`);
    check(checked.pod.containers[0].image === "registry.example.com/placer:0.1.0",
          "production: image not set by the overlay");
  }
  const hpa = production.find((o) => o.kind === "HorizontalPodAutoscaler");
  check(hpa?.spec.scaleTargetRef.name === checked?.deployment.metadata.name &&
        hpa?.spec.metrics.some((m) => m.pods?.metric.name === "placer_queue_depth"),
        "production: the HorizontalPodAutoscaler must scale the Deployment on placer_queue_depth");
} finally {
  fs.rmSync(copy, { recursive: true, force: true });
}

if (failures.length > 0) {
  console.error(`${failures.length} problem(s):\n  ${failures.join("\n  ")}`);
  process.exit(1);
}
console.log("deploy/k8s: every object valid, probes, grace period, security and sizes consistent");
