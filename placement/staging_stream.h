// CUDA streams for staging, compiled out without CUDA. Staging copies run on a side stream so
// they overlap the compute stream; the compute stream may use a staged tensor only after the
// copies finished, and the allocator must not hand its memory to the next staging while
// compute kernels queued on it may still read it.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "placement/block_spec.h"

namespace placer::placement {

// While alive, copies issued by this thread to `device` go to a side stream (no-op for the CPU).
class StagingStreamScope {
 public:
  explicit StagingStreamScope(const at::Device& device);
  ~StagingStreamScope();
  StagingStreamScope(const StagingStreamScope&) = delete;
  StagingStreamScope& operator=(const StagingStreamScope&) = delete;

  // Returns once every copy issued in the scope has completed.
  void WaitForCopies();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Marks staged tensors as used by the current (compute) stream of their device.
void UseOnComputeStream(const BlockWeights& weights);

}  // namespace placer::placement
