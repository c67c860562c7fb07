#include "server/stage_leader.h"

#include <spdlog/spdlog.h>

#include "base/status_macros.h"
#include "model/stage_worker.h"
#include "runtime/stage_pipeline.h"

#include <mutex>

namespace placer::server {

absl::StatusOr<std::unique_ptr<StageLeader>> StageLeader::Join(
    const StageOptions& stages, const std::string& model_dir,
    const placement::PlacementOptions& placement,
    std::function<void(const absl::Status&)> on_broken) {
  std::unique_ptr<StageLeader> leader(new StageLeader());
  leader->options_ = stages;
  PLACER_ASSIGN_OR_RETURN(leader->assignment_, JoinStageGroup(stages, model_dir, placement));
  leader->pipeline_ =
      std::make_shared<runtime::StagePipeline>(leader->assignment_.link, std::move(on_broken));
  leader->staged_.plan = leader->assignment_.plan;
  leader->staged_.hooks.push_back(std::make_shared<runtime::PipelineHook>(
      leader->pipeline_, BoundaryBlock(leader->assignment_.share)));
  leader->staged_.group_device_map = leader->assignment_.group_device_map;
  return leader;
}

StageLeader::~StageLeader() = default;

absl::Status StageLeader::StartServing(const model::CausalLm& model) {
  PLACER_RETURN_IF_ERROR(AwaitGroupLoaded(*assignment_.link, options_.rendezvous_timeout));
  PLACER_RETURN_IF_ERROR(model::PrepareLeaderLink(model, *assignment_.link));
  pipeline_->Start();
  return absl::OkStatus();
}

void StageLeader::StopPipeline() { pipeline_->Stop(); }

std::vector<std::pair<int, std::vector<StageMemoryUse>>> StageLeader::WorkersMemory() const {
  std::vector<std::pair<int, std::vector<StageMemoryUse>>> workers;
  for (int rank = 1; rank < options_.stages; ++rank) {
    absl::StatusOr<std::string> text =
        assignment_.link->Read(StageMemoryKey(rank), std::chrono::milliseconds(100));
    if (!text.ok()) continue;
    absl::StatusOr<std::vector<StageMemoryUse>> uses = DecodeStageMemory(*text);
    if (!uses.ok()) {
      static std::once_flag logged;
      std::call_once(logged, [&] {
        spdlog::warn("{}: {}", runtime::StageLink::StageName(rank, options_.stages),
                     std::string(uses.status().message()));
      });
      continue;
    }
    workers.emplace_back(rank, *std::move(uses));
  }
  return workers;
}

uint64_t StageLeader::bytes_sent() const { return assignment_.link->bytes_sent(); }
double StageLeader::wait_seconds() const { return pipeline_->wait_seconds(); }

}  // namespace placer::server
