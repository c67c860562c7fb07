// placerd's lifetime: bind the gRPC and metrics endpoints, report health, drain on request.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/status/statusor.h"
#include "server/auth_tokens.h"
#include "server/bearer_auth.h"
#include "server/flags.h"
#include "server/metrics.h"
#include "server/model_slot.h"
#include "server/health_service.h"
#include "server/inference_service.h"
#include "server/placer_service.h"
#include "server/request_gate.h"
#include "server/stage_leader.h"
#include "server/stage_metrics.h"

namespace placer::server {

class Daemon {
 public:
  // Binds every endpoint; fails with a message naming the flag whose address is unusable.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  // Stops the pipeline's receiver first: its failure callback touches health.
  ~Daemon();

  // Health NOT_SERVING at once, refuse new RPCs, let admitted ones finish up to the drain
  // timeout, then stop the server (cancelling what is left, health watches included).
  void Drain();

  // Loads the --model checkpoint (state "loading", health NOT_SERVING meanwhile) and then
  // turns health SERVING. A failure is the process's failure: the caller logs it and exits 1,
  // never serving a half-loaded model.
  absl::Status LoadModel();

  // SIGHUP: re-read --auth-token-file. On failure the old tokens stay in force; the error is
  // returned for the caller to log. Without --auth-token-file there is nothing to do.
  absl::Status ReloadTokens();

  int grpc_port() const { return grpc_port_; }

 private:
  explicit Daemon(const DaemonOptions& options);
  void SetServing(bool serving);
  // A pipeline stage failed: NOT_SERVING, and exit non-zero once the running streams were
  // told (so Kubernetes recreates the group).
  void OnStageFailure(const absl::Status& status);

  DaemonOptions options_;
  // Before metrics_: the exposer's thread reads the model (and the stage leader's figures)
  // at scrape time until it stops.
  ModelSlot model_;
  std::unique_ptr<StageLeader> stage_leader_;  // --stages > 1 on rank 0
  std::shared_ptr<StageMetrics> stage_metrics_ = std::make_shared<StageMetrics>(&model_);
  DaemonMetrics metrics_;
  RequestGate gate_;
  PlacerService service_;
  InferenceService inference_;  // the Open Inference Protocol, on the same server
  HealthService health_;  // NOT_SERVING until the model is ready
  HealthService plaintext_health_;  // the same statuses on --health-listen
  // Declared before server_: gRPC's token check points at them until the server is gone.
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<BearerAuth> auth_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;  // --health-listen: health service only
  int grpc_port_ = 0;
};

}  // namespace placer::server
