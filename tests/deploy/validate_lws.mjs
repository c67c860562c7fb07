// Checks deploy/k8s/overlays/multinode offline: `kubectl kustomize` renders the base with its
// Deployment replaced by components/multinode's LeaderWorkerSet, which must validate against
// LeaderWorkerSet's own CRD schema (lws_crds/, as kubernetes-sigs/lws publishes it, gzipped);
// then what the schema cannot know: a group of at least 2, both templates run placerd with
// --stage-listen on the pod's IP and gRPC health probes on its --health-listen port, names
// and images rewritten in the templates, the Service reaching the leader only, and the real
// placerd accepting each pod's arguments with the variables LeaderWorkerSet injects; and
// every pod's /metrics scraped exactly once: the leader through the Service's ServiceMonitor,
// the workers through the PodMonitor (valid against prometheus-operator's schema).
//
//   node validate_lws.mjs SOURCE_DIR KUBECTL PLACERD
//
// Exits 0 when all holds, 1 listing every failure.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import YAML from "yaml";
import Ajv from "ajv";
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const [sourceDir, kubectl, placerd] = process.argv.slice(2);
if (!sourceDir || !kubectl || !placerd) {
  console.error("usage: node validate_lws.mjs SOURCE_DIR KUBECTL PLACERD");
  process.exit(2);
}
const failures = [];
function check(condition, what) {
  if (!condition) failures.push(what);
  return condition;
}

const crd = YAML.parse(zlib.gunzipSync(fs.readFileSync(path.join(
    sourceDir, "tests", "deploy", "lws_crds", "leaderworkerset.x-k8s.io_leaderworkersets.yaml.gz"))).toString("utf8"));
const version = crd.spec.versions.find((v) => v.served && v.storage);
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
ajv.addKeyword({ keyword: "x-kubernetes-int-or-string", modifying: false, validate: () => true });
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
const validate = ajv.compile(intOrString(version.schema.openAPIV3Schema));

const rendered = execFileSync(kubectl, ["kustomize", path.join(sourceDir, "deploy", "k8s", "overlays", "multinode")],
                              { encoding: "utf8" });
const objects = YAML.parseAllDocuments(rendered).map((doc) => doc.toJS());
const byKind = (kind) => objects.filter((o) => o.kind === kind);
check(byKind("Deployment").length === 0, "multinode: the base's Deployment must be gone");
const [lws] = byKind("LeaderWorkerSet");
if (check(lws, "multinode: no LeaderWorkerSet")) {
  check(lws.apiVersion === `${crd.spec.group}/${version.name}`,
        `LeaderWorkerSet: apiVersion ${lws.apiVersion}, the CRD serves ${crd.spec.group}/${version.name}`);
  if (!validate(lws)) failures.push(`LeaderWorkerSet: ${ajv.errorsText(validate.errors, { separator: "; " })}`);
  const template = lws.spec.leaderWorkerTemplate;
  check(template.size >= 2, "LeaderWorkerSet: a group needs at least 2 pods (size)");
  const [configMap] = byKind("ConfigMap");
  const toml = configMap?.data?.["placerd.toml"] ?? "";
  const healthPort = Number(/health-listen = ".*:(\d+)"/.exec(toml)?.[1]);
  const [service] = byKind("Service");
  for (const [role, pod] of [["leader", template.leaderTemplate], ["worker", template.workerTemplate]]) {
    const label = `LeaderWorkerSet ${role}Template`;
    const [container] = pod.spec.containers;
    const args = container.args ?? [];
    check(args.includes("--stage-listen=$(POD_IP)"), `${label}: Gloo must bind the pod's IP (--stage-listen=$(POD_IP))`);
    check(container.env?.some((e) => e.name === "POD_IP" && e.valueFrom?.fieldRef?.fieldPath === "status.podIP"),
          `${label}: POD_IP must come from status.podIP`);
    check(!args.some((a) => a.startsWith("--stages") || a.startsWith("--stage-rank") || a.startsWith("--rendezvous=")),
          `${label}: --stages, --stage-rank and --rendezvous come from LeaderWorkerSet's variables`);
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      check(container[probe]?.grpc?.port === healthPort,
            `${label}: ${probe} must be a gRPC health probe on --health-listen's port ${healthPort}`);
    }
    check(container.image === "placer:0.1.0", `${label}: image ${container.image}, not the overlay's placer:0.1.0`);
    const volume = pod.spec.volumes.find((v) => v.configMap);
    check(volume?.configMap.name === configMap?.metadata.name,
          `${label}: mounts ConfigMap ${volume?.configMap.name}, the rendered one is ${configMap?.metadata.name}`);
    // The Service's labels (LeaderWorkerSet adds worker-index itself) must be the pods' own.
    for (const [key, value] of Object.entries(service?.spec.selector ?? {})) {
      if (key === "leaderworkerset.sigs.k8s.io/worker-index") continue;
      check(pod.metadata.labels?.[key] === value, `${label}: lacks the Service's selector label ${key}=${value}`);
    }
    // The real placerd on the pod's arguments and LeaderWorkerSet's variables, on loopback:
    // past flag parsing (exit 2) to the first thing the pod has and this machine lacks.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "placer-lws-"));
    fs.writeFileSync(path.join(dir, "placerd.toml"), toml);
    const local = args.map((a) => a.replace("/etc/placer/config/placerd.toml", path.join(dir, "placerd.toml"))
                                   .replace("$(POD_IP)", "127.0.0.1"));
    const run = spawnSync(placerd, [...local, "--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0",
                                    "--metrics-listen", ""],
                          { encoding: "utf8", timeout: 60000,
                            env: { ...process.env, LWS_GROUP_SIZE: String(template.size),
                                   LWS_WORKER_INDEX: role === "leader" ? "0" : "1",
                                   LWS_LEADER_ADDRESS: "127.0.0.1" } });
    fs.rmSync(dir, { recursive: true, force: true });
    const output = `${run.stdout}${run.stderr}`;
    const missing = role === "leader" ? "/etc/placer/tls/tls.crt" : "/models/model";
    check(run.status === 1 && output.includes(missing),
          `${label}: placerd should accept its arguments and stop at the missing ${missing}, ` +
          `got exit ${run.status}: ${output.trim()}`);
  }
  check(service?.spec.selector?.["leaderworkerset.sigs.k8s.io/worker-index"] === "0",
        "Service: must select the leader only (leaderworkerset.sigs.k8s.io/worker-index: \"0\")");

  // Metrics: the leader through the Service (ServiceMonitor), the workers per pod (PodMonitor).
  const metricsPort = Number(/metrics-listen = ".*:(\d+)"/.exec(toml)?.[1]);
  const selects = (selector, labels) =>
    Object.entries(selector ?? {}).every(([key, value]) => labels?.[key] === value);
  const [serviceMonitor] = byKind("ServiceMonitor");
  check(serviceMonitor && selects(serviceMonitor.spec.selector.matchLabels, service?.metadata.labels),
        "ServiceMonitor: must select the Service (the leader's metrics)");
  const [podMonitor] = byKind("PodMonitor");
  if (check(podMonitor, "multinode: no PodMonitor: the workers' /metrics would not be scraped")) {
    try {
      new PodMonitor(podMonitor).validate();
    } catch (error) {
      failures.push(`PodMonitor/${podMonitor.metadata?.name}: ${error.message}`);
    }
    const selector = podMonitor.spec.selector;
    check(Object.keys(selector?.matchLabels ?? {}).length > 0 && !selector?.matchExpressions,
          "PodMonitor: must select by matchLabels only");
    check(selects(selector?.matchLabels, template.workerTemplate.metadata.labels),
          "PodMonitor: must select the workerTemplate's pods");
    check(!selects(selector?.matchLabels, template.leaderTemplate.metadata.labels),
          "PodMonitor: must not select the leader, which the ServiceMonitor scrapes already");
    const ports = template.workerTemplate.spec.containers[0].ports ?? [];
    const endpoints = podMonitor.spec.podMetricsEndpoints ?? [];
    check(endpoints.length > 0 && endpoints.every((e) => e.path === "/metrics" &&
            ports.some((p) => p.name === e.port && p.containerPort === metricsPort)),
          `PodMonitor: must scrape /metrics on the workers' named port for --metrics-listen's ${metricsPort}`);
  }
}

if (failures.length > 0) {
  console.error(`${failures.length} problem(s):\n  ${failures.join("\n  ")}`);
  process.exit(1);
}
console.log("deploy/k8s/overlays/multinode: LeaderWorkerSet valid against its CRD; probes, stage flags and Service consistent");
