#include "runtime/block_runner.h"

#include <algorithm>

#include "runtime/align_devices_hook.h"
#include "runtime/compute_timing_hook.h"
#include "runtime/disk_readahead_hook.h"
#include "runtime/stage_weights_hook.h"
#include "base/status_macros.h"

namespace placer::runtime {

absl::StatusOr<std::unique_ptr<BlockRunner>> BlockRunner::Create(
    std::shared_ptr<const loader::Checkpoint> checkpoint, std::vector<BlockSpec> blocks,
    const RuntimePlan& plan, at::ScalarType dtype, std::shared_ptr<RuntimeAccounting> accounting,
    std::vector<std::shared_ptr<BlockHook>> extra_hooks, WeightRepacker resident_repacker) {
  std::unique_ptr<BlockRunner> runner(new BlockRunner(plan.virtual_gpus, std::move(accounting)));
  PLACER_ASSIGN_OR_RETURN(auto bound, BindBlocks(checkpoint, std::move(blocks), plan, dtype,
                                                 runner->accounting_.get()));
  runner->blocks_ = std::move(bound);

  runner->hooks_.push_back(std::make_shared<AlignDevicesHook>(runner->transfer_));
  PLACER_ASSIGN_OR_RETURN(
      auto staging,
      StageWeightsHook::Create(runner->blocks_, runner->transfer_, runner->accounting_.get(),
                               plan.execution_device, plan.prefetch && plan.staging_slots > 1,
                               plan.staging_slots));
  if (staging != nullptr) runner->hooks_.push_back(std::move(staging));
  if (plan.prefetch && std::any_of(runner->blocks_.begin(), runner->blocks_.end(), RunsFromDisk)) {
    runner->hooks_.push_back(std::make_shared<DiskReadaheadHook>(runner->blocks_));
  }
  if (resident_repacker &&
      std::any_of(runner->blocks_.begin(), runner->blocks_.end(),
                  RepackResidentWeightsHook::Applies)) {
    runner->hooks_.push_back(std::make_shared<RepackResidentWeightsHook>(
        runner->blocks_, std::move(resident_repacker)));
  }
  runner->hooks_.push_back(std::make_shared<ComputeTimingHook>(runner->accounting_.get()));
  for (auto& hook : extra_hooks) runner->hooks_.push_back(std::move(hook));
  return runner;
}

at::Device BlockRunner::torch_device(size_t block) const {
  return TorchDeviceOf(blocks_[block].execution_device, transfer_.virtual_gpus());
}

BlockRunner::Pass::Pass(BlockRunner& runner) : runner_(runner), lock_(runner.pass_mutex_) {
  for (const auto& hook : runner_.hooks_) hook->BeginPass();
}

BlockRunner::Pass::~Pass() {
  if (finished_) return;
  for (auto hook = runner_.hooks_.rbegin(); hook != runner_.hooks_.rend(); ++hook) {
    (*hook)->EndPass(nullptr);
  }
}

const BlockWeights& BlockRunner::Pass::Enter(size_t block,
                                             std::initializer_list<at::Tensor*> inputs) {
  const BoundBlock& bound = runner_.blocks_[block];
  call_ = BlockCall{block, &bound, inputs, &bound.weights, &layout_};
  for (const auto& hook : runner_.hooks_) hook->Enter(call_);
  return *call_.weights;
}

void BlockRunner::Pass::Exit(std::initializer_list<at::Tensor*> outputs) {
  call_.activations = outputs;
  for (auto hook = runner_.hooks_.rbegin(); hook != runner_.hooks_.rend(); ++hook) {
    (*hook)->Exit(call_);
  }
}

at::Tensor BlockRunner::Pass::Finish(at::Tensor output) {
  for (auto hook = runner_.hooks_.rbegin(); hook != runner_.hooks_.rend(); ++hook) {
    (*hook)->EndPass(&output);
  }
  finished_ = true;
  return output;
}

void BlockRunner::Pass::Abandon() {
  finished_ = true;
  for (auto hook = runner_.hooks_.rbegin(); hook != runner_.hooks_.rend(); ++hook) {
    (*hook)->EndPass(nullptr);
  }
}

}  // namespace placer::runtime
