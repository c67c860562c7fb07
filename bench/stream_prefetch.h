// How far ahead a one-row kernel should prefetch its weight stream: the experiment behind
// model/stream_prefetch.h's kStreamPrefetchBytes, rerunnable on any machine.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace placer::bench {

// `threads` threads multiply one float32 input of 768 by the rows of a `bytes` weight (each
// thread its contiguous share, one vector accumulator per row: the F32 few-row kernel's
// one-row loop), once without and once with a prefetch `distance` bytes ahead on the same
// stream, alternating which goes first, `pairs` times per distance. Each pass is timed by the
// threads themselves (first start to last end), so a descheduled timer cannot shorten it.
// Returns {"bytes", "threads", "isa", "distances": [{"distance_bytes", "plain_gbps" (median),
// "prefetch_gbps", "plain_best_gbps", "prefetch_best_gbps", "speedup" {"p25","median","p75"}
// of plain / prefetch time per pair}]}.
nlohmann::json MeasureStreamPrefetch(int64_t bytes, int threads, int pairs,
                                     const std::vector<int64_t>& distances);

}  // namespace placer::bench
