// CUDA streams for staging, compiled out without CUDA. Staging copies run on a side stream so
// they overlap the compute stream; the compute stream may use a staged tensor only after the
// copies finished, and the next copy into the same staging slot must wait until compute
// kernels queued on it no longer read it.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "runtime/block_spec.h"

namespace placer::runtime {

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

// A staging slot's buffer is reused across blocks: the next copy into it may start only after
// the compute stream finished the kernels that read the earlier blocks from it. Record() is
// called on the compute thread when the slot's last block is released (their kernels are
// queued by then); WaitOnCurrentStream() inside a StagingStreamScope makes the side stream
// wait for that point.
// Both are no-ops for the CPU, where compute has finished when the block is released.
class SlotFence {
 public:
  SlotFence();
  ~SlotFence();
  SlotFence(SlotFence&&) noexcept;
  SlotFence& operator=(SlotFence&&) noexcept;

  void Record(const at::Device& device);
  void WaitOnCurrentStream(const at::Device& device);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace placer::runtime
