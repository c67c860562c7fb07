// Stages offloaded blocks' weights onto the execution device on a background thread, so that
// block i+1 is copied in while block i computes. At most `slots` blocks are staged at once
// (the plan's staging reserve holds two), so memory never exceeds the plan.
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

#include "placement/block_spec.h"
#include "placement/runtime_accounting.h"

namespace placer::placement {

class WeightStager {
 public:
  // Copies one block's weights onto the execution device; may throw c10::Error.
  using StageFunction = std::function<BlockWeights(size_t block)>;

  WeightStager(size_t slots, StageFunction stage, RuntimeAccounting* accounting,
               std::string execution_device);
  ~WeightStager();
  WeightStager(const WeightStager&) = delete;
  WeightStager& operator=(const WeightStager&) = delete;

  // Starts staging `block` in the background when a slot is free and it is not staged or
  // being staged already. Never waits.
  void Prefetch(size_t block);

  // The staged weights of `block`, staging it now (on the caller's thread) when no prefetch
  // did; `waited_seconds` gets the time the caller spent waiting for weights. Rethrows a
  // failed staging.
  std::shared_ptr<const BlockWeights> Acquire(size_t block, double* waited_seconds);

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
  };

  void Work();
  void Fill(size_t block, Slot& slot, std::unique_lock<std::mutex>& lock);
  void EvictIdleSlot(std::unique_lock<std::mutex>& lock);  // mutex_ held

  const size_t slots_;
  StageFunction stage_;
  RuntimeAccounting* accounting_;
  std::string execution_device_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<size_t, Slot> staged_;
  std::deque<size_t> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace placer::placement
