#include "runtime/weight_stager.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

namespace placer::runtime {
namespace {

uint64_t BytesOf(const BlockWeights& weights) {
  uint64_t bytes = 0;
  for (const at::Tensor& tensor : weights) {
    if (tensor.defined()) bytes += static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
  }
  return bytes;
}

std::exception_ptr TooLargeError(size_t block, uint64_t bytes, uint64_t slot_bytes) {
  try {
    TORCH_CHECK(false, "staging block ", block, " needs ", bytes, " bytes, more than a staging ",
                "slot's ", slot_bytes);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

WeightStager::WeightStager(size_t slots, uint64_t slot_bytes, Sequence sequence,
                           StageFunction stage, RuntimeAccounting* accounting,
                           std::string execution_device)
    : slot_bytes_(slot_bytes),
      sequence_(std::move(sequence)),
      stage_(std::move(stage)),
      accounting_(accounting),
      execution_device_(std::move(execution_device)),
      slots_(std::max<size_t>(slots, 1)),
      worker_([this] { Work(); }) {}

WeightStager::~WeightStager() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
  while (!staged_.empty()) Drop(staged_.begin());
}

bool WeightStager::Reserve(size_t block) {
  const uint64_t bytes = sequence_.bytes(block);
  Staged staged;
  if (bytes > slot_bytes_) {
    staged.ready = true;
    staged.error = TooLargeError(block, bytes, slot_bytes_);
    staged.region.slot = slots_.size();  // holds no bytes
  } else {
    if (slots_[filling_slot_].end + bytes > slot_bytes_) {
      // The filling slot is full: move on to the next one once nothing lives in it, so a
      // slot's bytes are reused only after every block in it was released.
      const size_t next = (filling_slot_ + 1) % slots_.size();
      if (slots_[next].blocks > 0) return false;
      filling_slot_ = next;
    }
    SlotUse& slot = slots_[filling_slot_];
    staged.region = {filling_slot_, slot.end};
    slot.end += bytes;
    ++slot.blocks;
  }
  staged_.emplace(block, std::move(staged));
  staging_order_.push_back(block);
  return true;
}

std::optional<size_t> WeightStager::NextToStage() const {
  if (!ahead_) return std::nullopt;
  size_t block = *ahead_;
  // Skips what is staged already; all of the cycle staged means nothing is left to do.
  for (size_t step = 0; step <= staged_.size(); ++step) {
    if (staged_.count(block) == 0) return block;
    block = sequence_.next(block);
  }
  return std::nullopt;
}

void WeightStager::ReserveAhead() {
  const std::optional<size_t> block = NextToStage();
  if (block && Reserve(*block)) ahead_ = sequence_.next(*block);
}

std::optional<size_t> WeightStager::FirstUnclaimed() const {
  for (size_t block : staging_order_) {
    const Staged& staged = staged_.at(block);
    if (!staged.claimed && !staged.ready) return block;
  }
  return std::nullopt;
}

void WeightStager::Fill(size_t block, bool background, std::unique_lock<std::mutex>& lock) {
  // std::map nodes are stable, and a claimed block is never dropped before it is ready, so
  // the reference survives the unlocked copy.
  Staged& staged = staged_.at(block);
  staged.claimed = true;
  if (staged.ready) return;  // refused at reservation
  const StagingRegion region = staged.region;
  lock.unlock();
  std::shared_ptr<const BlockWeights> weights;
  std::exception_ptr error;
  try {
    weights = std::make_shared<const BlockWeights>(stage_(block, region, background));
  } catch (...) {
    error = std::current_exception();
  }
  const uint64_t bytes = weights ? BytesOf(*weights) : 0;
  if (accounting_ != nullptr && bytes > 0) {
    accounting_->AddMemory(execution_device_, MemoryKind::kStaging, static_cast<int64_t>(bytes));
  }
  lock.lock();
  staged.weights = std::move(weights);
  staged.error = error;
  staged.bytes = bytes;
  staged.ready = true;
  changed_.notify_all();
}

void WeightStager::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    std::optional<size_t> block;
    changed_.wait(lock, [&] {
      if (stopping_) return true;
      ReserveAhead();
      block = FirstUnclaimed();
      return block.has_value();
    });
    if (stopping_) return;
    Fill(*block, /*background=*/true, lock);
  }
}

void WeightStager::Prefetch(size_t block) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ahead_ = block;
    // Reserved here, not when the worker wakes up: an Acquire right after finds it.
    ReserveAhead();
  }
  changed_.notify_all();
}

void WeightStager::Drop(std::map<size_t, Staged>::iterator staged) {
  const Staged& dropped = staged->second;
  if (accounting_ != nullptr && dropped.bytes > 0) {
    accounting_->AddMemory(execution_device_, MemoryKind::kStaging,
                           -static_cast<int64_t>(dropped.bytes));
  }
  if (dropped.region.slot < slots_.size()) {
    SlotUse& slot = slots_[dropped.region.slot];
    if (--slot.blocks == 0) {
      slot.end = 0;
      if (sequence_.emptied) sequence_.emptied(dropped.region.slot);
    }
  }
  staging_order_.erase(std::find(staging_order_.begin(), staging_order_.end(), staged->first));
  staged_.erase(staged);
}

std::shared_ptr<const BlockWeights> WeightStager::Acquire(size_t block, double* waited_seconds,
                                                          StagingRegion* region) {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = staged_.find(block);
  if (it == staged_.end()) {
    // What was staged ahead is not what is needed: drop it (once its copies are done) and
    // stage this block here.
    ahead_.reset();
    changed_.wait(lock, [&] {
      return std::all_of(staged_.begin(), staged_.end(), [](const auto& entry) {
        return entry.second.ready || !entry.second.claimed;
      });
    });
    for (auto entry = staged_.begin(); entry != staged_.end();) {
      if (entry->second.in_use) {
        ++entry;
      } else {
        Drop(entry++);
      }
    }
    changed_.wait(lock, [&] { return Reserve(block); });
    Fill(block, /*background=*/false, lock);
    it = staged_.find(block);
  } else {
    // Reserved but not picked up by the worker yet: copying it here saves the wake-up.
    if (!it->second.claimed) Fill(block, /*background=*/false, lock);
    changed_.wait(lock, [&] { return it->second.ready; });
    // Blocks staged before this one were skipped: their room goes to what comes next.
    while (staging_order_.front() != block) {
      auto skipped = staged_.find(staging_order_.front());
      if (skipped->second.in_use || !skipped->second.ready) break;
      Drop(skipped);
    }
  }
  if (waited_seconds != nullptr) {
    *waited_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  Staged& staged = it->second;
  if (staged.error) {
    std::exception_ptr error = staged.error;
    Drop(it);
    changed_.notify_all();
    std::rethrow_exception(error);
  }
  staged.in_use = true;
  if (region != nullptr) *region = staged.region;
  return staged.weights;
}

void WeightStager::Release(size_t block) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = staged_.find(block);
    if (it == staged_.end()) return;
    // Never drop a block while its copy runs (a release of a block not acquired).
    changed_.wait(lock, [&] { return it->second.ready || !it->second.claimed; });
    Drop(it);
  }
  changed_.notify_all();
}

size_t WeightStager::staged_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return staged_.size();
}

}  // namespace placer::runtime
