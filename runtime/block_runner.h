// Enforces a plan on every forward call (Accelerate's dispatch_model): the weights are bound
// once where the plan puts them (bound_block.h), and each block's call runs through a chain of
// hooks, one concern each (block_hook.h): AlignDevicesHook moves the inputs onto the block's
// execution device, StageWeightsHook stages offloaded weights with prefetch,
// DiskReadaheadHook reads ahead blocks that run from the mapped files,
// RepackResidentWeightsHook gives host-memory weights the CPU kernels' layout, ComputeTimingHook
// counts compute. A new concern is one more hook (ModelRuntime::extra_hooks); the model's code
// asks for weights and never names a device.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/checkpoint.h"
#include "runtime/block_hook.h"
#include "runtime/bound_block.h"
#include "runtime/device_transfer.h"
#include "runtime/repack_resident_weights_hook.h"
#include "runtime/runtime_accounting.h"
#include "runtime/runtime_plan.h"

namespace placer::runtime {

class BlockRunner {
 public:
  // Binds the blocks (errors name the block and tensor) and builds the hook chain: the
  // default hooks, then `extra_hooks` in order (innermost: they see each block's inputs on its
  // execution device and its weights there). `resident_repacker`, when set, re-lays out the
  // weights of blocks held and run in host memory on their first call
  // (RepackResidentWeightsHook).
  static absl::StatusOr<std::unique_ptr<BlockRunner>> Create(
      std::shared_ptr<const loader::Checkpoint> checkpoint, std::vector<BlockSpec> blocks,
      const RuntimePlan& plan, at::ScalarType dtype,
      std::shared_ptr<RuntimeAccounting> accounting,
      std::vector<std::shared_ptr<BlockHook>> extra_hooks = {},
      WeightRepacker resident_repacker = nullptr);

  size_t block_count() const { return blocks_.size(); }
  const BoundBlock& block(size_t index) const { return blocks_[index]; }
  // The libtorch device a block computes on (host memory for a virtual GPU).
  at::Device torch_device(size_t block) const;
  const DeviceTransfer& transfer() const { return transfer_; }
  RuntimeAccounting& accounting() const { return *accounting_; }

  // One forward pass through the blocks in order. Passes run one at a time: they share the
  // hooks' state (staging slots, the activations' device).
  class Pass {
   public:
    explicit Pass(BlockRunner& runner);
    ~Pass();  // ends the pass for the hooks when Finish was not reached or failed (a block threw)
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

    // The pass's rows (sequences, positions, KV blocks) as the model encodes them, for hooks
    // that carry the pass to another stage; before the first Enter.
    void SetLayout(std::vector<int64_t> layout) { layout_ = std::move(layout); }
    // Runs the hooks' Enter for `block` over its inputs and returns the weights it computes
    // with, valid until its Exit.
    const BlockWeights& Enter(size_t block, std::initializer_list<at::Tensor*> inputs);
    // Runs the hooks' Exit for the block just entered, over its outputs.
    void Exit(std::initializer_list<at::Tensor*> outputs);
    // Ends the pass: `output` in host memory. When a hook's EndPass throws, the pass is
    // abandoned as if a block had thrown.
    at::Tensor Finish(at::Tensor output);
    // The caller fails the step after Finish (converting or keeping the output): the hooks
    // are told the pass was abandoned after all (EndPass(nullptr)), so what it left outside
    // this process (another stage's KV writes) is undone too. Call it while the pass lives.
    void Abandon();

   private:
    BlockRunner& runner_;
    std::unique_lock<std::mutex> lock_;
    BlockCall call_;
    std::vector<int64_t> layout_;
    bool finished_ = false;
  };

 private:
  BlockRunner(bool virtual_gpus, std::shared_ptr<RuntimeAccounting> accounting)
      : transfer_(virtual_gpus, accounting.get()), accounting_(std::move(accounting)) {}

  std::vector<BoundBlock> blocks_;
  DeviceTransfer transfer_;
  std::shared_ptr<RuntimeAccounting> accounting_;
  std::vector<std::shared_ptr<BlockHook>> hooks_;  // Enter in this order, Exit in reverse
  std::mutex pass_mutex_;
};

}  // namespace placer::runtime
