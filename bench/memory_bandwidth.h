// Host memory bandwidth as libtorch sees it with the same intra-op threads as the model: the
// denominator of the decode floor (weights read per token / bandwidth) and of the offload
// transfer floor (bytes staged per token / bandwidth).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace placer::bench {

// Times `runs` passes over a buffer of `bytes` each way:
//   copy:  dst.copy_(src) into a destination written once before (no page faults): "measured
//          copy bandwidth", bytes copied per second
//   clone: src.clone() into fresh memory each time (what staging does: at::empty + copy)
//   read:  src.sum(), bytes read per second (what a decode step does with its weights)
// Returns {"bytes", "threads", "copy"|"clone"|"read": {"seconds": [...], "bytes_per_second":
// median-based}}.
nlohmann::json MeasureMemoryBandwidth(int64_t bytes, int runs);

}  // namespace placer::bench
