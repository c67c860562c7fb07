// Rank 0 of a pipeline group: joins the rendezvous (stage_group.h), hands the model loader
// its share's plan and the pipeline hook, and once every stage has loaded starts the
// pipeline (heartbeats, the receiver of the last stage's answers). A stage that fails is
// reported once through `on_broken`.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "server/model_loading.h"
#include "server/stage_group.h"
#include "server/stage_memory.h"

namespace placer::runtime {
class StagePipeline;
}

namespace placer::server {

class StageLeader {
 public:
  static absl::StatusOr<std::unique_ptr<StageLeader>> Join(
      const StageOptions& stages, const std::string& model_dir,
      const placement::PlacementOptions& placement,
      std::function<void(const absl::Status&)> on_broken);
  ~StageLeader();

  const StagedLoad& staged_load() const { return staged_; }
  const placement::StageShare& share() const { return assignment_.share; }
  // After the leader loaded `model`: waits for the other stages to load, then starts the
  // pipeline (its messages carry the model's KV blocks in use; model::PrepareLeaderLink).
  absl::Status StartServing(const model::CausalLm& model);
  // No more on_broken calls and no more passes: before what on_broken touches goes.
  void StopPipeline();

  // For the metrics: bytes of steps sent to stage 1, seconds waited for the last stage's
  // answers (the time the leader waits on the other stages), every stage's planned memory.
  uint64_t bytes_sent() const;
  double wait_seconds() const;
  const std::vector<StageDeviceFigures>& group_devices() const { return assignment_.group_devices; }
  int stages() const { return options_.stages; }
  // Every worker's live device memory as it last published it (rank, figures), read from
  // the store now; a worker that has not published, or sent figures that do not parse, is
  // left out (and logged once).
  std::vector<std::pair<int, std::vector<StageMemoryUse>>> WorkersMemory() const;

 private:
  StageLeader() = default;
  StageOptions options_;
  StageAssignment assignment_;
  StagedLoad staged_;
  std::shared_ptr<runtime::StagePipeline> pipeline_;
};

}  // namespace placer::server
