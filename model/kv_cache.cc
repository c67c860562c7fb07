#include "model/kv_cache.h"

#include <algorithm>

#include "c10/util/Exception.h"

namespace placer::model {

KvCache::KvCache(std::shared_ptr<KvBlockPool> pool, std::vector<int32_t> blocks,
                 int64_t capacity, int64_t window)
    : pool_(std::move(pool)), blocks_(std::move(blocks)), capacity_(capacity), window_(window) {
  TORCH_CHECK(!ring() || (window_ > 0 && window_ <= held_positions()),
              "KvCache: ", held_positions(), " positions hold neither the sequence's ", capacity_,
              " nor its window of ", window_);
  for (size_t i = 1; i < blocks_.size(); ++i) {
    if (blocks_[i] != blocks_[i - 1] + 1) contiguous_ = false;
  }
  if (ring()) contiguous_ = false;
}

KvCache::~KvCache() {
  if (!mirrored_) pool_->Give(blocks_);
}

std::unique_ptr<KvCache> KvCache::Mirror(std::shared_ptr<KvBlockPool> pool,
                                         std::vector<int32_t> blocks, int64_t capacity,
                                         int64_t window, int64_t length) {
  auto cache = std::make_unique<KvCache>(std::move(pool), std::move(blocks), capacity, window);
  cache->mirrored_ = true;
  cache->length_ = length;
  return cache;
}

int64_t KvCache::SlotOf(int64_t position) const {
  constexpr int64_t kBlock = KvBlockPool::kBlockPositions;
  const auto entry = static_cast<size_t>((position / kBlock) % static_cast<int64_t>(blocks_.size()));
  return static_cast<int64_t>(blocks_[entry]) * kBlock + position % kBlock;
}

void KvCache::BeginStep(int64_t tokens) {
  step_tokens_ = tokens;
  undo_.clear();
  write_slots_ = at::Tensor();
  read_slots_ = at::Tensor();
}

void KvCache::ComputeSlots() {
  const int64_t tokens = step_tokens_;
  // A ring keeps the window - 1 positions before this step (the first query's window) and
  // stores only the step's last held_positions() tokens: earlier ones would be overwritten
  // within the step. The step's queries read its own keys from the step's tensors.
  const int64_t first_read = ring() ? length_ - std::min(length_, window_ - 1) : 0;
  const int64_t read_end = ring() ? length_ : length_ + tokens;
  written_ = ring() ? std::min(tokens, held_positions()) : tokens;
  std::vector<int64_t> reads, writes;
  for (int64_t position = first_read; position < read_end; ++position) {
    reads.push_back(SlotOf(position));
  }
  for (int64_t position = length_ + tokens - written_; position < length_ + tokens; ++position) {
    writes.push_back(SlotOf(position));
  }
  read_slots_ = at::tensor(reads, at::kLong);
  write_slots_ = at::tensor(writes, at::kLong);
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
  if (ring()) {
    // Read before writing: the step's stores may land on the slots of positions it reads.
    at::Tensor seen_keys = at::cat({keys.index_select(1, read), k}, 1);
    at::Tensor seen_values = at::cat({values.index_select(1, read), v}, 1);
    if (tokens > 1) {
      undo_.push_back({layer, write, keys.index_select(1, write), values.index_select(1, write)});
    }
    keys.index_copy_(1, write, k.narrow(1, tokens - written_, written_));
    values.index_copy_(1, write, v.narrow(1, tokens - written_, written_));
    return {seen_keys, seen_values};
  }
  keys.index_copy_(1, write, k);
  values.index_copy_(1, write, v);
  return {keys.index_select(1, read), values.index_select(1, read)};
}

void KvCache::Rollback() {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    pool_->keys(it->layer).index_copy_(1, it->slots, it->keys);
    pool_->values(it->layer).index_copy_(1, it->slots, it->values);
  }
  undo_.clear();
}

}  // namespace placer::model
