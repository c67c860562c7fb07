#include "server/stage_worker_process.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "model/stage_worker.h"
#include "server/health_service.h"
#include "server/stage_group.h"

namespace placer::server {

int RunStageWorker(const DaemonOptions& options) {
  const std::string name = runtime::StageLink::StageName(options.stages.rank, options.stages.stages);
  HealthService health({"", "placer.v1.Placer"});
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  int health_port = 0;
  if (!options.health_listen.empty()) {
    builder.AddListeningPort(options.health_listen, grpc::InsecureServerCredentials(), &health_port);
  }
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0 || (!options.health_listen.empty() && health_port == 0)) {
    spdlog::error("--listen {} / --health-listen {}: cannot listen (address in use or not "
                  "available)", options.listen, options.health_listen);
    return 1;
  }
  // Health only, plaintext, on both addresses: the model APIs are the leader's.
  spdlog::info("{}: health on {} (port {}){}; the leader serves the model APIs", name,
               options.listen, port,
               options.health_listen.empty() ? "" : " and " + options.health_listen);
  if (options.model_dir.empty()) {
    spdlog::error("{}: --stages needs --model on every rank", name);
    return 1;
  }
  auto assignment = JoinStageGroup(options.stages, options.model_dir, options.placement);
  if (!assignment.ok()) {
    spdlog::error("{}: {}", name, std::string(assignment.status().message()));
    return 1;
  }
  spdlog::info("{}: decoder layers {}..{}", name, assignment->share.first_layer,
               assignment->share.end_layer - 1);
  auto checkpoint = loader::Checkpoint::Open(options.model_dir);
  if (!checkpoint.ok()) {
    spdlog::error("{}: {}", name, std::string(checkpoint.status().message()));
    return 1;
  }
  auto model = model::LoadPlacedModel(*checkpoint, assignment->plan);
  if (!model.ok()) {
    spdlog::error("{}: cannot load its share: {}", name, std::string(model.status().message()));
    return 1;
  }
  if (absl::Status loaded = AwaitGroupLoaded(*assignment->link, options.stages.rendezvous_timeout);
      !loaded.ok()) {
    spdlog::error("{}: {}", name, std::string(loaded.message()));
    return 1;
  }
  health.SetServing(true);
  spdlog::info("{}: serving its layers", name);
  const absl::Status ended = model::ServeStageSteps(**model, *assignment->link);
  health.SetServing(false);
  spdlog::error("{}: the group is gone, exiting: {}", name, std::string(ended.message()));
  return 1;
}

}  // namespace placer::server
