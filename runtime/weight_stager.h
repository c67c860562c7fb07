// Stages offloaded blocks' weights onto the execution device on a background thread, running
// ahead of compute as far as the staging reserve allows: while block i computes, blocks i+1,
// i+2, ... are copied in, in the order passes use them (cyclic: the next pass starts over).
//
// The reserve is `slots` equal buffers, each as large as the largest staged block (double
// buffering). A slot takes consecutive blocks one after another while they fit, and is reused
// from its start only once every block in it was released. So at most slots x slot_bytes are
// ever staged (the plan's reserve), the block being computed never blocks the staging of the
// next one (the other slot is then empty or already holds what follows), and a buffer's bytes
// are overwritten only after all their readers are done (see SlotFence).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/block_spec.h"
#include "runtime/runtime_accounting.h"

namespace placer::runtime {

// Where a staged block's bytes go: a slot buffer, from a byte offset in it.
struct StagingRegion {
  size_t slot = 0;
  uint64_t offset = 0;
};

class WeightStager {
 public:
  // Copies one block's weights onto the execution device into `region`, whose bytes no other
  // staged block uses until this one is released; `background` is true on the stager's own
  // thread (compute runs meanwhile) and false when the block is needed now. May throw
  // c10::Error.
  using StageFunction =
      std::function<BlockWeights(size_t block, StagingRegion region, bool background)>;

  struct Sequence {
    std::function<uint64_t(size_t block)> bytes;  // what the block takes in a slot
    std::function<size_t(size_t block)> next;     // the staged block that follows it
    // Called when a slot's last block is released, on the releasing (compute) thread and
    // before the slot takes new blocks; none may be copying into it then. Optional.
    std::function<void(size_t slot)> emptied;
  };

  WeightStager(size_t slots, uint64_t slot_bytes, Sequence sequence, StageFunction stage,
               RuntimeAccounting* accounting, std::string execution_device);
  ~WeightStager();
  WeightStager(const WeightStager&) = delete;
  WeightStager& operator=(const WeightStager&) = delete;

  // Stages `block` and the blocks after it in the background, as room allows. Never waits.
  void Prefetch(size_t block);

  // The staged weights of `block`, staging it now (on the caller's thread) when no prefetch
  // did; `waited_seconds` gets the time the caller spent waiting for weights, `region` (when
  // given) where the weights live. Blocks staged ahead but skipped are dropped. Rethrows a
  // failed staging.
  std::shared_ptr<const BlockWeights> Acquire(size_t block, double* waited_seconds,
                                              StagingRegion* region = nullptr);

  // Gives back the bytes of a block taken with Acquire.
  void Release(size_t block);

  size_t staged_blocks() const;

 private:
  struct Staged {
    bool claimed = false;  // a thread is copying it (reserved blocks wait for the worker)
    bool ready = false;
    bool in_use = false;
    std::shared_ptr<const BlockWeights> weights;
    std::exception_ptr error;
    uint64_t bytes = 0;  // charged to the execution device once the copy is done
    StagingRegion region;
  };
  struct SlotUse {
    uint64_t end = 0;  // bytes handed out since the slot was last empty
    size_t blocks = 0;  // staged blocks living in it
  };

  void Work();
  // Reserves room for `block` and records it as staging; mutex_ held. False when no slot has
  // room yet (a release will make some).
  bool Reserve(size_t block);
  // The next block to reserve room for, if any; mutex_ held.
  std::optional<size_t> NextToStage() const;
  // Reserves the next block ahead if there is room; mutex_ held.
  void ReserveAhead();
  // The oldest reserved block nobody copies yet; mutex_ held.
  std::optional<size_t> FirstUnclaimed() const;
  // Copies a reserved block on the calling thread; mutex_ held, released during the copy.
  void Fill(size_t block, bool background, std::unique_lock<std::mutex>& lock);
  void Drop(std::map<size_t, Staged>::iterator staged);  // mutex_ held

  const uint64_t slot_bytes_;
  Sequence sequence_;
  StageFunction stage_;
  RuntimeAccounting* accounting_;
  std::string execution_device_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<size_t, Staged> staged_;
  std::deque<size_t> staging_order_;  // staged blocks, oldest first
  std::vector<SlotUse> slots_;
  size_t filling_slot_ = 0;
  std::optional<size_t> ahead_;  // where the worker resumes staging
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace placer::runtime
