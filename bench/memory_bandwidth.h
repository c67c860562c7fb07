// Host memory bandwidth as libtorch sees it with the same intra-op threads as the model: the
// denominator of the decode floor (weights read per token / bandwidth) and of the offload
// transfer floor (bytes staged per token / bandwidth).
#pragma once

#include <ATen/core/Tensor.h>

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

// The read bandwidth at one moment, for a decode step timed next to it: one `read` pass (as
// above) over its own buffer of `bytes`, timed. This host's read bandwidth moved from 30 to
// 52 GB/s within one bench run, minute to minute, so a floor measured apart from the steps it
// bounds was beaten by a fifth in one run and out of reach in the next; a probe next to a step
// gives that step its own floor.
class ReadProbe {
 public:
  explicit ReadProbe(int64_t bytes);
  int64_t bytes() const;
  // Bytes read per second by one pass now.
  double BytesPerSecond();

 private:
  at::Tensor source_;
  double sink_ = 0;  // the passes' sums, so none is optimized away
};

}  // namespace placer::bench
