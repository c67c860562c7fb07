#include "model/kv_block_pool.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace placer::model {

KvBlockPool::KvBlockPool(std::vector<LayerPlacement> layers, int64_t blocks,
                         std::shared_ptr<runtime::RuntimeAccounting> accounting)
    : layers_(std::move(layers)), block_count_(blocks), accounting_(std::move(accounting)) {
  for (const LayerPlacement& layer : layers_) {
    if (!layer.held) continue;
    if (std::find(devices_.begin(), devices_.end(), layer.device_name) == devices_.end()) {
      devices_.push_back(layer.device_name);
    }
  }
  for (int32_t block = 0; block < blocks; ++block) free_.insert(free_.end(), block);
}

absl::StatusOr<std::shared_ptr<KvBlockPool>> KvBlockPool::Create(
    std::vector<LayerPlacement> layers, int64_t kv_heads, int64_t head_dim, int64_t blocks,
    at::ScalarType dtype, std::shared_ptr<runtime::RuntimeAccounting> accounting) {
  if (blocks < 1 || blocks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a KV cache of ", blocks, " blocks is out of range"));
  }
  std::shared_ptr<KvBlockPool> pool(new KvBlockPool(std::move(layers), blocks, std::move(accounting)));
  try {
    for (const LayerPlacement& layer : pool->layers_) {
      if (!layer.held) {
        pool->keys_.emplace_back();
        pool->values_.emplace_back();
        continue;
      }
      const auto options = at::TensorOptions().dtype(dtype).device(layer.device);
      // Never zeroed: a position is always written before attention reads it.
      pool->keys_.push_back(at::empty({kv_heads, blocks * kBlockPositions, head_dim}, options));
      pool->values_.push_back(at::empty({kv_heads, blocks * kBlockPositions, head_dim}, options));
      const int64_t bytes = 2 * pool->keys_.back().numel() * pool->keys_.back().element_size();
      auto charged = std::find_if(pool->charged_.begin(), pool->charged_.end(),
                                  [&](const auto& entry) { return entry.first == layer.device_name; });
      if (charged == pool->charged_.end()) {
        pool->charged_.emplace_back(layer.device_name, bytes);
      } else {
        charged->second += bytes;
      }
      if (pool->accounting_ != nullptr) {
        pool->accounting_->AddMemory(layer.device_name, runtime::MemoryKind::kKvCache, bytes);
      }
    }
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate the KV cache (", blocks, " blocks of ", kBlockPositions,
                     " positions per layer): ", e.what_without_backtrace()));
  }
  std::lock_guard<std::mutex> lock(pool->mutex_);
  pool->PublishCounts();
  return pool;
}

KvBlockPool::~KvBlockPool() {
  if (accounting_ == nullptr) return;
  for (const auto& [device, bytes] : charged_) {
    accounting_->AddMemory(device, runtime::MemoryKind::kKvCache, -bytes);
  }
  for (const std::string& device : devices_) accounting_->SetKvBlocks(device, 0, 0);
}

int64_t KvBlockPool::InUse() const {
  return mirrored_in_use_ >= 0 ? mirrored_in_use_ : block_count_ - static_cast<int64_t>(free_.size());
}

void KvBlockPool::PublishCounts() const {
  if (accounting_ == nullptr) return;
  const auto used = static_cast<uint64_t>(InUse());
  for (const std::string& device : devices_) {
    accounting_->SetKvBlocks(device, used, static_cast<uint64_t>(block_count_) - used);
  }
}

int64_t KvBlockPool::blocks_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return InUse();
}

void KvBlockPool::MirrorBlocksInUse(int64_t used) {
  std::lock_guard<std::mutex> lock(mutex_);
  mirrored_in_use_ = std::clamp<int64_t>(used, 0, block_count_);
  PublishCounts();
}

absl::StatusOr<std::vector<int32_t>> KvBlockPool::Take(int64_t positions) {
  const int64_t wanted = placement::KvBlocksFor(positions);
  std::lock_guard<std::mutex> lock(mutex_);
  if (wanted < 1 || wanted > static_cast<int64_t>(free_.size())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the KV cache has ", free_.size(), " free blocks of ", block_count_, " (",
        kBlockPositions, " positions each); a sequence of ", positions, " positions needs ",
        wanted));
  }
  std::vector<int32_t> blocks;
  // The first run of `wanted` consecutive free blocks, else the lowest free ones (low ids
  // first keeps the touched part of the pool small).
  int32_t run_start = -1, run_length = 0, previous = -2;
  for (int32_t block : free_) {
    run_start = block == previous + 1 ? run_start : block;
    run_length = block == previous + 1 ? run_length + 1 : 1;
    previous = block;
    if (run_length == wanted) break;
  }
  if (run_length == wanted) {
    for (int32_t block = run_start; block < run_start + wanted; ++block) blocks.push_back(block);
  } else {
    blocks.assign(free_.begin(), std::next(free_.begin(), wanted));
  }
  for (int32_t block : blocks) free_.erase(block);
  PublishCounts();
  return blocks;
}

void KvBlockPool::Give(const std::vector<int32_t>& blocks) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.insert(blocks.begin(), blocks.end());
  PublishCounts();
}

int64_t KvBlockPool::blocks_free() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(free_.size());
}

}  // namespace placer::model
