// The ints of a stage layout (model/stage_layout.h) as another process sent them, checked
// field by field before anything is built from them. Torch-free, so the fuzz target
// (tests/fuzz/stage_wire_fuzzer.cc) reaches it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace placer::model {

struct StageSequenceLayout {
  int64_t offset = 0, length = 0;  // its rows in the pass
  int64_t start = 0;               // its first position
  int64_t capacity = -1;           // positions its cache serves; -1: no cache
  std::vector<int32_t> blocks;     // its KV block table
};

// Rows within `rows`, in order and covering them; blocks within a pool of `pool_blocks`
// (0: none); capacities the blocks hold, or at least the ring's `window`. Errors say which
// sequence and field.
absl::StatusOr<std::vector<StageSequenceLayout>> ParseStageLayout(
    const std::vector<int64_t>& layout, int64_t rows, int64_t pool_blocks, int64_t window);

}  // namespace placer::model
