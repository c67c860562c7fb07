// Stages offloaded blocks' weights onto the execution device on a background thread, so that
// block i+1 is copied in while block i computes. At most `slots` blocks are staged at once
// (the plan's staging reserve holds two), so memory never exceeds the plan. Each staged block
// owns one slot index in [0, slots) from staging to release, so the stage function can copy
// into a buffer preallocated per slot instead of allocating on every pass.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "placement/block_spec.h"
#include "placement/runtime_accounting.h"

namespace placer::placement {

class WeightStager {
 public:
  // Copies one block's weights onto the execution device, into the buffer of `slot`, which
  // no other block uses until this one is released or evicted; may throw c10::Error.
  using StageFunction = std::function<BlockWeights(size_t block, size_t slot)>;

  WeightStager(size_t slots, StageFunction stage, RuntimeAccounting* accounting,
               std::string execution_device);
  ~WeightStager();
  WeightStager(const WeightStager&) = delete;
  WeightStager& operator=(const WeightStager&) = delete;

  // Starts staging `block` in the background when a slot is free and it is not staged or
  // being staged already. Never waits.
  void Prefetch(size_t block);

  // The staged weights of `block`, staging it now (on the caller's thread) when no prefetch
  // did; `waited_seconds` gets the time the caller spent waiting for weights, `slot` (when
  // given) the slot the weights live in. Rethrows a failed staging.
  std::shared_ptr<const BlockWeights> Acquire(size_t block, double* waited_seconds,
                                              size_t* slot = nullptr);

  // Gives back the slot of a block taken with Acquire.
  void Release(size_t block);

  size_t staged_blocks() const;

 private:
  struct Slot {
    bool ready = false;
    bool in_use = false;
    std::shared_ptr<const BlockWeights> weights;
    std::exception_ptr error;
    uint64_t bytes = 0;
    size_t index = 0;  // which of the `slots_` buffers
  };

  void Work();
  void Fill(size_t block, Slot& slot, std::unique_lock<std::mutex>& lock);
  void EvictIdleSlot(std::unique_lock<std::mutex>& lock);  // mutex_ held
  // A new slot for `block` with a free index; mutex_ held and fewer than slots_ staged.
  Slot& AddSlot(size_t block);
  void EraseSlot(std::map<size_t, Slot>::iterator slot);  // mutex_ held

  const size_t slots_;
  StageFunction stage_;
  RuntimeAccounting* accounting_;
  std::string execution_device_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<size_t, Slot> staged_;
  std::vector<bool> index_in_use_;
  std::deque<size_t> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace placer::placement
