// What the vdpbf16ps kernels over packed codes share (quantized_int4_bf16.h,
// quantized_int8_bf16.h): the CPU they run on, which layouts they take, a block's header, the
// BF16 bits of inputs that were widened from BF16, and how a row's outputs are finished (their
// passes of up to 8 rows: row_passes.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "loader/quantized_layout.h"
#include "model/packed_block_header.h"

namespace placer::model {

// AVX-512 F, BW, VL and BF16: what both kernels need.
inline bool PackedBf16KernelsRun() {
  static const bool runs = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  }();
  return runs;
}

// `bits`-bit codes in groups of a multiple of `inputs_per_step` inputs that tile `in`.
inline bool PackedInGroupsOf(const loader::PackedLayout& layout, int bits, int64_t inputs_per_step) {
  return layout.bits == bits && layout.group_size > 0 && layout.group_size % inputs_per_step == 0 &&
         layout.in % layout.group_size == 0;
}

// The BF16 bits of a float32 widened from BF16 (so exact: its low 16 bits are zero).
inline uint32_t Bf16BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits >> 16;
}

// Output n of R rows (y: [rows, out]): each row's 16 lanes summed in the intrinsic's fixed order,
// then its offset terms, then the bias.
template <int R>
__attribute__((target("avx512f"), always_inline)) inline void StoreRowOutputs(
    const __m512 (&acc)[R], const float (&offsets)[R], const float* bias, float* y, int64_t out,
    int64_t n) {
  const float b = bias != nullptr ? bias[n] : 0.0f;
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    y[r * out + n] = _mm512_reduce_add_ps(acc[r]) + offsets[r] + b;
  }
}

}  // namespace placer::model
