#include "model/kv_cache.h"

namespace placer::model {

KvCache::KvCache(std::shared_ptr<KvBlockPool> pool, std::vector<int32_t> blocks,
                 int64_t capacity)
    : pool_(std::move(pool)), blocks_(std::move(blocks)), capacity_(capacity) {
  for (size_t i = 1; i < blocks_.size(); ++i) {
    if (blocks_[i] != blocks_[i - 1] + 1) contiguous_ = false;
  }
}

KvCache::~KvCache() { pool_->Give(blocks_); }

void KvCache::BeginStep(int64_t tokens) {
  step_tokens_ = tokens;
  write_slots_ = at::Tensor();
  read_slots_ = at::Tensor();
}

void KvCache::ComputeSlots() {
  const int64_t tokens = step_tokens_;
  std::vector<int64_t> slots;
  slots.reserve(static_cast<size_t>(length_ + tokens));
  for (int64_t position = 0; position < length_ + tokens; ++position) {
    const int64_t block = blocks_[static_cast<size_t>(position / KvBlockPool::kBlockPositions)];
    slots.push_back(block * KvBlockPool::kBlockPositions + position % KvBlockPool::kBlockPositions);
  }
  read_slots_ = at::tensor(slots, at::kLong);
  write_slots_ = read_slots_.narrow(0, length_, tokens);
}

at::Tensor KvCache::SlotsOn(const at::Tensor& slots, at::Device device) const {
  return slots.device() == device ? slots : slots.to(device);
}

std::pair<at::Tensor, at::Tensor> KvCache::Append(int64_t layer, const at::Tensor& k,
                                                  const at::Tensor& v) {
  at::Tensor& keys = pool_->keys(layer);
  at::Tensor& values = pool_->values(layer);
  const int64_t tokens = k.size(1);
  if (contiguous_) {
    const int64_t base = static_cast<int64_t>(blocks_.front()) * KvBlockPool::kBlockPositions;
    keys.narrow(1, base + length_, tokens).copy_(k);
    values.narrow(1, base + length_, tokens).copy_(v);
    return {keys.narrow(1, base, length_ + tokens), values.narrow(1, base, length_ + tokens)};
  }
  if (!read_slots_.defined()) ComputeSlots();
  const at::Device device = keys.device();
  const at::Tensor write = SlotsOn(write_slots_, device);
  const at::Tensor read = SlotsOn(read_slots_, device);
  keys.index_copy_(1, write, k);
  values.index_copy_(1, write, v);
  return {keys.index_select(1, read), values.index_select(1, read)};
}

}  // namespace placer::model
