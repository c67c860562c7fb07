#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "server/auth_credentials.h"
#include "server/build_info.h"
#include "model/generation_engine.h"
#include "server/model_loading.h"
#include "server/nv_gpu_metrics.h"
#include "server/served_model_metrics.h"
#include "base/status_macros.h"

namespace placer::server {
namespace {
constexpr char kPlacerServiceName[] = "placer.v1.Placer";

// Plaintext is fine where only this machine can connect; anywhere else tokens and prompts
// would cross the network readable.
bool IsLoopback(const std::string& listen) {
  const std::string host = listen.substr(0, listen.rfind(':'));
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// --warm-up: one token (id 0, in every vocabulary) through every block and the head, as a
// request's first step would go; its logits are dropped.
absl::Status WarmUp(const model::CausalLm& model) {
  const absl::StatusOr<model::Logits> logits = model.Forward({0}, /*all_positions=*/false);
  if (logits.ok()) return absl::OkStatus();
  return absl::Status(logits.status().code(),
                      absl::StrCat("--warm-up: the forward pass failed: ", logits.status().message()));
}
}  // namespace

Daemon::Daemon(const DaemonOptions& options)
    : options_(options),
      service_(&model_, &gate_, &metrics_, TextLimits{options.max_stop_sequences}),
      inference_(&model_, &gate_, &metrics_,
                 InferenceServiceOptions{options.model_name,
                                         TextLimits{options.max_stop_sequences},
                                         options.max_queue}),
      health_({"", kPlacerServiceName}),
      plaintext_health_({"", kPlacerServiceName}) {}

Daemon::~Daemon() {
  if (stage_leader_ != nullptr) stage_leader_->StopPipeline();
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  std::unique_ptr<Daemon> daemon(new Daemon(options));
  if (!options.metrics_listen.empty()) {
    daemon->metrics_.AddCollectable(std::make_shared<ServedModelMetrics>(
        &daemon->model_, LiveDeviceProbe(options.placement)));
    if (options.stages.enabled()) daemon->metrics_.AddCollectable(daemon->stage_metrics_);
    if (NvGpuMetrics::Available()) {
      daemon->metrics_.AddCollectable(std::make_shared<NvGpuMetrics>());
    }
    absl::Status status = daemon->metrics_.Serve(options.metrics_listen);
    if (!status.ok()) return status;
  }

  PLACER_ASSIGN_OR_RETURN(auto tls,
                          LoadTlsFiles(options.tls_cert, options.tls_key, options.tls_client_ca));
  if (!options.auth_token_file.empty()) {
    PLACER_ASSIGN_OR_RETURN(auto tokens, TokenStore::Open(options.auth_token_file));
    daemon->tokens_ = std::move(tokens);
    daemon->auth_ = std::make_unique<BearerAuth>(daemon->tokens_.get(), &daemon->metrics_);
  }
  if (!tls.has_value() && !IsLoopback(options.listen)) {
    spdlog::warn("--listen {} is reachable from other machines but serves plaintext: "
                 "give --tls-cert and --tls-key", options.listen);
  }

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Linux lets two processes share a port with SO_REUSEPORT, which would hide a port clash.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_request_bytes);
  builder.AddListeningPort(options.listen, MakeServerCredentials(tls, daemon->auth_.get()),
                           &daemon->grpc_port_);
  builder.RegisterService(&daemon->service_);
  builder.RegisterService(&daemon->inference_);
  builder.RegisterService(&daemon->health_);
  daemon->server_ = builder.BuildAndStart();
  if (daemon->server_ == nullptr || daemon->grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "--listen: cannot listen on ", options.listen, " (address in use or not available)"));
  }
  if (!options.health_listen.empty()) {
    grpc::ServerBuilder health_builder;
    health_builder.RegisterService(&daemon->plaintext_health_);
    health_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    int health_port = 0;
    health_builder.AddListeningPort(options.health_listen, grpc::InsecureServerCredentials(),
                                    &health_port);
    daemon->health_server_ = health_builder.BuildAndStart();
    if (daemon->health_server_ == nullptr || health_port == 0) {
      return absl::UnavailableError(absl::StrCat("--health-listen: cannot listen on ",
                                                 options.health_listen,
                                                 " (address in use or not available)"));
    }
    spdlog::info("plaintext health service on {} (port {})", options.health_listen, health_port);
  }
  spdlog::info("placerd {} ({}) listening on {} (port {}, {}, {}), metrics on {}", PLACER_VERSION,
               BuildCommit(), options.listen, daemon->grpc_port_,
               !tls.has_value()                   ? "plaintext"
               : tls->client_ca_pem.empty() ? "TLS"
                                                   : "TLS with client certificates",
               daemon->tokens_ ? "bearer tokens required" : "no token check",
               options.metrics_listen.empty() ? "(disabled)" : options.metrics_listen);
  if (options.model_dir.empty()) {
    spdlog::warn("no --model given: serving no model; model RPCs answer FAILED_PRECONDITION");
  }
  return daemon;
}

absl::Status Daemon::ReloadTokens() {
  if (tokens_ == nullptr) return absl::OkStatus();
  return tokens_->Reload();
}

absl::Status Daemon::LoadModel() {
  if (options_.model_dir.empty()) return absl::OkStatus();
  ModelSnapshot loading;
  loading.state = ModelState::kLoading;
  loading.path = options_.model_dir;
  model_.Set(loading);
  spdlog::info("loading model {}", options_.model_dir);
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ModelSnapshot> loaded = absl::UnknownError("not loaded");
  if (options_.stages.enabled()) {
    auto leader = StageLeader::Join(options_.stages, options_.model_dir, options_.placement,
                                    [this](const absl::Status& status) { OnStageFailure(status); });
    if (leader.ok()) {
      stage_leader_ = *std::move(leader);
      stage_metrics_->SetLeader(stage_leader_.get());
      spdlog::info("pipeline leader of {} stages: decoder layers {}..{} here",
                   options_.stages.stages, stage_leader_->share().first_layer,
                   stage_leader_->share().end_layer - 1);
      loaded = LoadServedModel(options_.model_dir, options_.placement, &stage_leader_->staged_load());
      if (loaded.ok()) {
        if (absl::Status started_group = stage_leader_->StartServing(*loaded->model);
            !started_group.ok()) {
          loaded = started_group;
        }
      }
    } else {
      loaded = leader.status();
    }
  } else {
    loaded = LoadServedModel(options_.model_dir, options_.placement);
  }
  const double load_only_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  double warm_up_seconds = 0;
  if (loaded.ok() && options_.warm_up) {
    const auto warm_started = std::chrono::steady_clock::now();
    if (absl::Status warmed = WarmUp(*loaded->model); warmed.ok()) {
      warm_up_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_started).count();
    } else {
      loaded = warmed;
    }
  }
  if (!loaded.ok()) {
    ModelSnapshot failed = loading;
    failed.state = ModelState::kFailed;
    failed.error = std::string(loaded.status().message());
    model_.Set(failed);
    return loaded.status();
  }
  // Loading parses tokenizer.json and tokenizer_config.json into JSON trees (tens of MiB for
  // a large vocabulary, a Llama 3's 9 MB file among them) and frees them again; glibc keeps
  // the freed heap mapped, so without this the process would hold that much more RSS for its
  // whole life (bench/analysis.md).
  malloc_trim(0);
  spdlog::info("loaded {} in {:.3f}s: {}, {} parameters, {}{}", loaded->path, load_only_seconds,
               loaded->architecture, loaded->parameter_count, loaded->dtype,
               loaded->has_tokenizer ? "" : ", no tokenizer (text requests are refused)");
  if (options_.warm_up) {
    spdlog::info("--warm-up: one forward pass of one token in {:.3f}s before SERVING (the first "
                 "call's work: weights re-laid out or read in, buffers allocated)",
                 warm_up_seconds);
  }
  loaded->warm_up_seconds = warm_up_seconds;
  loaded->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  loaded->engine = std::make_shared<model::GenerationEngine>(
      loaded->model,
      model::EngineLimits{static_cast<int>(loaded->limits.max_batch_size),
                      options_.max_batch_tokens, options_.max_queue},
      [metrics = &metrics_](int step_sequences, const model::EngineFigures& after) {
        metrics->ObserveSchedulerStep(step_sequences, after.running, after.queued);
      });
  model_.Set(*std::move(loaded));
  SetServing(true);
  return absl::OkStatus();
}

void Daemon::OnStageFailure(const absl::Status& status) {
  spdlog::error("pipeline stage failed: {}; health NOT_SERVING, running streams fail, exiting",
                std::string(status.message()));
  SetServing(false);
  // Long enough for the streams' UNAVAILABLE to reach their clients; the group is restarted
  // as a whole, so nothing here is worth draining.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    spdlog::default_logger()->flush();
    std::_Exit(3);
  }).detach();
}

void Daemon::SetServing(bool serving) {
  health_.SetServing(serving);
  plaintext_health_.SetServing(serving);
}

void Daemon::Drain() {
  // Health first: load balancers and probes must stop sending before anything is refused.
  health_.Shutdown();
  plaintext_health_.Shutdown();
  gate_.StartDraining();
  const int in_flight = gate_.in_flight();
  spdlog::info("draining: {} request(s) in flight, waiting up to {} ms", in_flight,
               options_.drain_timeout.count());
  const bool idle = gate_.WaitIdle(std::chrono::steady_clock::now() + options_.drain_timeout);
  if (!idle) {
    spdlog::warn("drain timeout reached with {} request(s) still running; cancelling them",
                 gate_.in_flight());
    gate_.CancelRemaining();
    // A stream notices within one decode step; give it that long to tell its client why.
    gate_.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  }
  // A second lets statuses of RPCs that just returned reach their clients; then whatever is
  // left (health watches) is cancelled.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
  }
  spdlog::info("drained; exiting");
}

}  // namespace placer::server
