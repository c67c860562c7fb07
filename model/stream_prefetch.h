// StreamAhead, StreamAheadRows: how far ahead the few-row kernels prefetch their one weight stream.
#pragma once

#include <cstdint>

namespace placer::model {

// Bytes ahead of a weight row's loads that the float few-row kernels (F32 and BF16 weights)
// prefetch into L1 (not the AVX512-BF16 one: small_batch_bf16.cc says why), on the same
// sequential stream the hardware prefetchers already follow; the packed kernels prefetch whole
// rows at least this far ahead. Without it, one input row waited
// on memory (perf put nearly every sample of the F32 one-row loop on the load after its FMA).
// `placer-bench-model stream-prefetch --mib 300 --threads 2` (2-vCPU Zen 4 EPYC, 100 pairs of
// passes with and without, median speedup): 1.14-1.19x at every distance from 2 to 16 KiB in
// one run; a first C version of it gave 1.00x at 2 KiB and 16 KiB, 1.09-1.18x at 4-8 KiB
// (bench/analysis.md). Several streams (the rows of a tile prefetched ahead) were slower on
// that machine; this keeps one.
inline constexpr int64_t kStreamPrefetchBytes = 8 << 10;

// The address kStreamPrefetchBytes past `row` when that far a row of `row_elements` still ends
// inside the weight (`end`, one past its last element), else `row` itself: the pointer stays
// inside the weight, and a row near the end prefetches lines it reads anyway.
template <typename Element>
inline const Element* StreamAhead(const Element* row, int64_t row_elements, const Element* end) {
  constexpr int64_t kAhead = kStreamPrefetchBytes / static_cast<int64_t>(sizeof(Element));
  return end - row >= kAhead + row_elements ? row + kAhead : row;
}

// Whole rows of `row_bytes` that make at least kStreamPrefetchBytes: how far ahead a kernel that
// prefetches row by row (the packed kernels) reads its stream.
inline int64_t StreamAheadRows(int64_t row_bytes) {
  return row_bytes <= 0 ? 1 : (kStreamPrefetchBytes + row_bytes - 1) / row_bytes;
}

}  // namespace placer::model
