#include "server/stage_worker_process.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "model/stage_worker.h"
#include "server/health_service.h"
#include "server/metrics.h"
#include "server/model_loading.h"
#include "server/model_slot.h"
#include "server/served_model_metrics.h"
#include "server/stage_group.h"
#include "server/stage_memory.h"

namespace placer::server {
namespace {

// Republishes this rank's live device memory in the leader's store every second, for the
// leader's metrics, until stopped or the store is gone.
class MemoryPublisher {
 public:
  MemoryPublisher(runtime::StageLink& link, std::shared_ptr<const runtime::RuntimeAccounting> accounting)
      : thread_([this, &link, accounting] {
          std::unique_lock<std::mutex> lock(mutex_);
          do {
            if (!link.Publish(StageMemoryKey(link.rank()), EncodeStageMemory(accounting->Figures())).ok()) {
              return;
            }
          } while (!stop_changed_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; }));
        }) {}
  ~MemoryPublisher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    stop_changed_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable stop_changed_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

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
  StagedLoad staged;
  staged.plan = assignment->plan;
  absl::StatusOr<ModelSnapshot> loaded = LoadServedModel(options.model_dir, options.placement, &staged);
  if (!loaded.ok()) {
    spdlog::error("{}: cannot load its share: {}", name, std::string(loaded.status().message()));
    return 1;
  }
  const std::shared_ptr<const model::CausalLm> model = loaded->model;
  const std::shared_ptr<const runtime::RuntimeAccounting> accounting = loaded->accounting;
  // Its own /metrics: this node's devices, as a single placerd reports them (the slot is
  // declared first: the exposer reads it until it stops).
  ModelSlot slot;
  slot.Set(*std::move(loaded));
  DaemonMetrics metrics;
  if (!options.metrics_listen.empty()) {
    metrics.AddCollectable(std::make_shared<ServedModelMetrics>(&slot, LiveDeviceProbe(options.placement)));
    if (absl::Status serving = metrics.Serve(options.metrics_listen); !serving.ok()) {
      spdlog::error("{}: {}", name, std::string(serving.message()));
      return 1;
    }
  }
  MemoryPublisher publisher(*assignment->link, accounting);
  if (absl::Status group = AwaitGroupLoaded(*assignment->link, options.stages.rendezvous_timeout);
      !group.ok()) {
    spdlog::error("{}: {}", name, std::string(group.message()));
    return 1;
  }
  health.SetServing(true);
  spdlog::info("{}: serving its layers", name);
  const absl::Status ended = model::ServeStageSteps(*model, *assignment->link);
  health.SetServing(false);
  spdlog::error("{}: the group is gone, exiting: {}", name, std::string(ended.message()));
  return 1;
}

}  // namespace placer::server
