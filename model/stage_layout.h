// A pass's rows as they travel to another pipeline stage: for each sequence its rows in the
// batch, its first position, and its KV block table (every stage's pool has the same blocks,
// for its own layers, and the leader's cache decides which a sequence holds). Other stages
// keep no per-sequence state: a step's layout is all they need to run their layers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/forward_runner.h"
#include "model/kv_cache.h"

namespace placer::model {

std::vector<int64_t> EncodeStageLayout(const std::vector<SequenceRows>& sequences);

struct DecodedLayout {
  std::vector<SequenceRows> sequences;  // caches point into `caches`
  std::vector<std::unique_ptr<KvCache>> caches;
  int64_t rows = 0;
};

// Checks everything (the ints come from another process): rows within `rows`, blocks within
// the pool, capacities the blocks hold. Errors say which sequence and field.
absl::StatusOr<DecodedLayout> DecodeStageLayout(const std::vector<int64_t>& layout, int64_t rows,
                                                const std::shared_ptr<KvBlockPool>& pool,
                                                int64_t window);

// A worker's side of the leader's rollback of a failed step: puts back what the step's
// writes overwrote in its ring caches (KvCache::Rollback), so a retry reads what it would
// have. Nothing to do for caches that are not rings, or steps of one row per sequence.
void RollbackStageStep(DecodedLayout& step);

}  // namespace placer::model
