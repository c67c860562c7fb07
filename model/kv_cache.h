// One sequence's keys and values: its block table in the shared KvBlockPool, on each layer's
// execution device. The blocks for the sequence's whole length are taken when it starts, so
// a running stream never runs out later; they go back to the pool when it ends.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "model/causal_lm.h"
#include "model/kv_block_pool.h"

namespace placer::model {

class KvCache final : public SequenceCache {
 public:
  KvCache(std::shared_ptr<KvBlockPool> pool, std::vector<int32_t> blocks, int64_t capacity);
  ~KvCache() override;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t length() const override { return length_; }
  int64_t capacity() const override { return capacity_; }

  // Before a forward pass that adds `tokens` positions.
  void BeginStep(int64_t tokens);
  // Writes this step's keys/values ([kv_heads, T, head_dim], on the layer's device) at
  // positions length()..+T-1 of `layer` and returns all keys/values so far
  // ([kv_heads, length()+T, head_dim]). Commit() advances length() once every layer has
  // appended.
  std::pair<at::Tensor, at::Tensor> Append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  void Commit(int64_t tokens) { length_ += tokens; }

  const std::vector<int32_t>& blocks() const { return blocks_; }
  KvBlockPool& pool() const { return *pool_; }

 private:
  at::Tensor SlotsOn(const at::Tensor& slots, at::Device device) const;
  // The pool positions of this step's tokens and of all before them, when first needed (a
  // step whose rows all go through DecodeAttention never needs them).
  void ComputeSlots();

  std::shared_ptr<KvBlockPool> pool_;
  std::vector<int32_t> blocks_;
  int64_t capacity_;
  int64_t length_ = 0;
  // Consecutive blocks: the keys are one slice of the pool, read and written in place.
  bool contiguous_ = true;
  int64_t step_tokens_ = 0;
  // Otherwise: pool positions of this step's new tokens and of every position so far.
  at::Tensor write_slots_, read_slots_;
};

}  // namespace placer::model
