// AlignedCodeLines: a run of consecutive 64-byte vectors of packed codes, read with aligned
// loads only.
//
// A packed block's codes start 8 bytes past its header (loader/quantized_layout.h), and a row of
// blocks is 8 bytes more than a multiple of 64, so an unaligned 64-byte load of them straddles
// two cache lines nearly every time. On Zen 5 those split loads stalled the 8-bit x BF16 decode
// kernel: the ~1.1B int8 decode step 44-54 ms against 25-29 ms with this (bench/analysis.md,
// "Split loads of packed codes"). Here each cache line is loaded once, aligned, and each vector
// is two neighbouring lines put together by one vpermt2d: the same 64 bytes, so every result is
// bit for bit what the unaligned loads gave.
#pragma once

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

namespace placer::model {

// Promise: Next() returns the 64 bytes at codes + 64·k on its k-th call, and reads no cache line
// that holds none of those bytes (so never past the end of the weight, nor into a page that
// holds none of its codes). `codes` must be 4-byte aligned (packed blocks are 8-byte aligned).
class AlignedCodeLines {
 public:
  __attribute__((target("avx512f"), always_inline)) explicit AlignedCodeLines(
      const uint8_t* codes) {
    const uintptr_t misalign = reinterpret_cast<uintptr_t>(codes) & 63;
    lines_ = reinterpret_cast<const __m512i*>(codes - misalign);
    // Misaligned: each vector is the tail of line k and the head of line k + 1. Aligned: it is
    // line k alone, taken whole from the second operand, and no line past the run is loaded.
    step_ = misalign != 0 ? 1 : 0;
    const int first = misalign != 0 ? static_cast<int>(misalign / 4) : 16;
    index_ = _mm512_add_epi32(_mm512_set1_epi32(first),
                              _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    line_ = _mm512_load_si512(lines_);
  }

  __attribute__((target("avx512f"), always_inline)) __m512i Next() {
    const __m512i next = _mm512_load_si512(lines_ + step_);
    const __m512i vector = _mm512_permutex2var_epi32(line_, index_, next);
    line_ = next;
    ++lines_;
    return vector;
  }

 private:
  const __m512i* lines_;
  int64_t step_;
  __m512i index_;
  __m512i line_;
};

}  // namespace placer::model
