// The fixed header of every message between pipeline stages (runtime/stage_link.h), as
// another process sent it: kind, step id, layout ints, rows, width, dtype, and the KV blocks in
// use on the leader (every message, heartbeats too: the workers' pools only mirror the
// leader's block tables, and report this as their own). Torch-free, so the
// fuzz target (tests/fuzz/stage_wire_fuzzer.cc) reaches the parsing of those bytes.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace placer::runtime {

// kRollback: the leader failed step `step` after the workers ran it; each puts back what the
// step overwrote in its ring KV caches and passes it on (model/stage_worker.h).
enum class StageMessageKind : int64_t {
  kStep = 1,
  kHeartbeat = 2,
  kStepFailed = 3,
  kRollback = 4,
};

inline constexpr int64_t kStageHeaderInts = 7;
// The hidden states' dtype on the wire: ATen's ScalarType numbers (stage_link.cc checks them).
inline constexpr int64_t kWireF16 = 5, kWireF32 = 6, kWireBF16 = 15;
// A peer is trusted no further than its header: what it may announce.
inline constexpr int64_t kMaxLayoutInts = int64_t{1} << 24;
inline constexpr int64_t kMaxHiddenElements = int64_t{1} << 32;

struct StageHeader {
  StageMessageKind kind = StageMessageKind::kStep;
  int64_t step = 0;
  int64_t layout_ints = 0;
  int64_t rows = 0, width = 0;
  int64_t dtype = 0;  // a kWire* code when rows * width > 0
  int64_t kv_blocks_in_use = 0;  // on the leader when the message left it; up to INT32_MAX
};

// `ints`: kStageHeaderInts of them. A bad header is an error naming every field.
absl::StatusOr<StageHeader> ParseStageHeader(const int64_t* ints);

}  // namespace placer::runtime
