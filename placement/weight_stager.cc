#include "placement/weight_stager.h"

#include <chrono>

namespace placer::placement {
namespace {

uint64_t BytesOf(const BlockWeights& weights) {
  uint64_t bytes = 0;
  for (const at::Tensor& tensor : weights) {
    if (tensor.defined()) bytes += static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
  }
  return bytes;
}

}  // namespace

WeightStager::WeightStager(size_t slots, StageFunction stage, RuntimeAccounting* accounting,
                           std::string execution_device)
    : slots_(slots < 1 ? 1 : slots),
      stage_(std::move(stage)),
      accounting_(accounting),
      execution_device_(std::move(execution_device)),
      index_in_use_(slots_, false),
      worker_([this] { Work(); }) {}

WeightStager::~WeightStager() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
  for (const auto& [block, slot] : staged_) {
    if (accounting_ != nullptr && slot.bytes > 0) {
      accounting_->AddMemory(execution_device_, MemoryKind::kStaging,
                             -static_cast<int64_t>(slot.bytes));
    }
  }
}

void WeightStager::Fill(size_t block, Slot& slot, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  std::shared_ptr<const BlockWeights> weights;
  std::exception_ptr error;
  try {
    weights = std::make_shared<const BlockWeights>(stage_(block, slot.index));
  } catch (...) {
    error = std::current_exception();
  }
  const uint64_t bytes = weights ? BytesOf(*weights) : 0;
  if (accounting_ != nullptr && bytes > 0) {
    accounting_->AddMemory(execution_device_, MemoryKind::kStaging, static_cast<int64_t>(bytes));
  }
  lock.lock();
  slot.weights = std::move(weights);
  slot.error = error;
  slot.bytes = bytes;
  slot.ready = true;
  changed_.notify_all();
}

void WeightStager::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const size_t block = queue_.front();
    queue_.pop_front();
    // std::map nodes are stable, and a pending slot is never erased, so the reference
    // survives the unlocked copy.
    Fill(block, staged_.at(block), lock);
  }
}

void WeightStager::Prefetch(size_t block) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (staged_.count(block) > 0 || staged_.size() >= slots_) return;
    AddSlot(block);
    queue_.push_back(block);
  }
  changed_.notify_all();
}

WeightStager::Slot& WeightStager::AddSlot(size_t block) {
  Slot slot;
  while (index_in_use_[slot.index]) ++slot.index;
  index_in_use_[slot.index] = true;
  return staged_.emplace(block, std::move(slot)).first->second;
}

void WeightStager::EraseSlot(std::map<size_t, Slot>::iterator slot) {
  if (accounting_ != nullptr && slot->second.bytes > 0) {
    accounting_->AddMemory(execution_device_, MemoryKind::kStaging,
                           -static_cast<int64_t>(slot->second.bytes));
  }
  index_in_use_[slot->second.index] = false;
  staged_.erase(slot);
}

void WeightStager::EvictIdleSlot(std::unique_lock<std::mutex>& lock) {
  while (staged_.size() >= slots_) {
    for (auto it = staged_.begin(); it != staged_.end(); ++it) {
      if (it->second.ready && !it->second.in_use) {
        EraseSlot(it);
        return;
      }
    }
    // Every slot is in use or still being filled: wait for the worker to finish one.
    changed_.wait(lock);
  }
}

std::shared_ptr<const BlockWeights> WeightStager::Acquire(size_t block, double* waited_seconds,
                                                          size_t* slot_index) {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = staged_.find(block);
  if (it == staged_.end()) {
    EvictIdleSlot(lock);
    AddSlot(block);
    it = staged_.find(block);
    Fill(block, it->second, lock);
  } else {
    changed_.wait(lock, [&] { return it->second.ready; });
  }
  if (waited_seconds != nullptr) {
    *waited_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  Slot& slot = it->second;
  if (slot.error) {
    std::exception_ptr error = slot.error;
    EraseSlot(it);
    changed_.notify_all();
    std::rethrow_exception(error);
  }
  slot.in_use = true;
  if (slot_index != nullptr) *slot_index = slot.index;
  return slot.weights;
}

void WeightStager::Release(size_t block) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = staged_.find(block);
  if (it == staged_.end()) return;
  EraseSlot(it);
  changed_.notify_all();
}

size_t WeightStager::staged_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return staged_.size();
}

}  // namespace placer::placement
