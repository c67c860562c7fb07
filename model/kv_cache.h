// One sequence's keys and values: its block table in the shared KvBlockPool, on each layer's
// execution device. The blocks are taken when the sequence starts, so a running stream never
// runs out later; they go back to the pool when it ends.
//
// A model whose every layer sees only a sliding window of W keys needs no more than W
// positions per sequence: such a cache holds ceil(W / kBlockPositions) blocks and uses them
// as a ring (position p lives in block table entry (p / kBlockPositions) % blocks), so a
// Mistral stream of 32k positions with a 4k window takes 4k positions of the pool, not 32k.
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
  // `window`: keys each query sees (0: all). The blocks must hold `capacity` positions, or
  // at least `window` (a ring).
  KvCache(std::shared_ptr<KvBlockPool> pool, std::vector<int32_t> blocks, int64_t capacity,
          int64_t window = 0);
  ~KvCache() override;
  // Another pipeline stage's view of a sequence the leader holds: the same block table (every
  // stage's pool has the same blocks for its own layers) at `length` positions. The blocks stay
  // the leader's: nothing is given back when the view goes.
  static std::unique_ptr<KvCache> Mirror(std::shared_ptr<KvBlockPool> pool,
                                         std::vector<int32_t> blocks, int64_t capacity,
                                         int64_t window, int64_t length);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t length() const override { return length_; }
  int64_t capacity() const override { return capacity_; }

  // Before a forward pass that adds `tokens` positions.
  void BeginStep(int64_t tokens);
  // Writes this step's keys/values ([kv_heads, T, head_dim], on the layer's device) at
  // positions length()..+T-1 of `layer` and returns the keys/values the step's queries see:
  // every position so far, or in a ring the window - 1 before length() and the step's own
  // ([kv_heads, kept + T, head_dim], oldest first). Commit() advances length() once every
  // layer has appended.
  std::pair<at::Tensor, at::Tensor> Append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  void Commit(int64_t tokens) {
    length_ += tokens;
    undo_.clear();
  }
  // After a step that failed between BeginStep and Commit: puts back what its appends wrote
  // over positions the sequence still reads, so that a retry of the step sees the keys and
  // values it would have. Only a ring overwrites such positions, and only with a step of more
  // than one token (a single decode row lands on a position outside every later window).
  void Rollback();

  const std::vector<int32_t>& blocks() const { return blocks_; }
  KvBlockPool& pool() const { return *pool_; }
  // Positions the blocks hold; fewer than capacity() for a ring.
  int64_t held_positions() const {
    return static_cast<int64_t>(blocks_.size()) * KvBlockPool::kBlockPositions;
  }
  bool ring() const { return held_positions() < capacity_; }

 private:
  int64_t SlotOf(int64_t position) const;
  at::Tensor SlotsOn(const at::Tensor& slots, at::Device device) const;
  // The pool positions this step reads and writes, when first needed (a step whose rows all
  // go through DecodeAttention never needs them).
  void ComputeSlots();

  std::shared_ptr<KvBlockPool> pool_;
  std::vector<int32_t> blocks_;
  int64_t capacity_;
  int64_t window_;
  int64_t length_ = 0;
  bool mirrored_ = false;  // Mirror: the blocks belong to the leader's cache
  // Consecutive blocks, no ring: the keys are one slice of the pool, read and written in place.
  bool contiguous_ = true;
  int64_t step_tokens_ = 0;
  // Otherwise: pool positions of this step's written tokens and of the positions it reads
  // from the pool (every one so far; in a ring only those before this step).
  at::Tensor write_slots_, read_slots_;
  int64_t written_ = 0;  // this step's last `written_` tokens are stored (all unless a ring)
  // What this step's appends overwrote in a ring, per layer, for Rollback.
  struct Overwritten {
    int64_t layer;
    at::Tensor slots, keys, values;
  };
  std::vector<Overwritten> undo_;
};

}  // namespace placer::model
