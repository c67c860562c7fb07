// Counts each block's compute: host time from its Enter to its Exit (on the CPU its
// arithmetic; on a GPU the time to issue its kernels), summed per block in RuntimeAccounting.
// Innermost of the default hooks, so staging waits and moves are not counted as compute.
#pragma once

#include <chrono>

#include "runtime/block_hook.h"

namespace placer::runtime {

class ComputeTimingHook final : public BlockHook {
 public:
  explicit ComputeTimingHook(RuntimeAccounting* accounting) : accounting_(accounting) {}

  void Enter(BlockCall& /*call*/) override { started_ = std::chrono::steady_clock::now(); }
  void Exit(BlockCall& call) override {
    accounting_->AddBlockCompute(
        call.bound->spec.module,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  }

 private:
  RuntimeAccounting* accounting_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace placer::runtime
