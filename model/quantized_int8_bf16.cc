// The 8-bit x BF16 kernel (quantized_int8_bf16.h says what it promises).
//
// 64 inputs are 64 code bytes, in input order. Read as 16 dwords, dword i holds the codes of
// inputs 4i .. 4i+3, one per byte; as BF16 halves, the low half holds 4i and 4i+1, the high half
// 4i+2 and 4i+3. Shifting the dword by +3, -1, -5 and -9 bits brings one nibble of each half to
// bits 3-6 and 19-22, the top of both BF16 halves' mantissas; one vpternlogd masks them and sets
// the exponent: low nibbles of (4i, 4i+2), high nibbles of (4i, 4i+2), low of (4i+1, 4i+3), high
// of (4i+1, 4i+3). The high nibbles are the stored int8's, its sign bit flipped by the same
// vpternlogd, so that each code reads as q + 128 in 0..255. The inputs are arranged once per call
// into those two pairings (ArrangeInt8Bf16Inputs), so vdpbf16ps multiplies each nibble with its
// own code's input.
#include "model/quantized_int8_bf16.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "model/aligned_code_lines.h"
#include "model/packed_bf16_kernels.h"
#include "model/row_passes.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kInputsPerChunk = 64;  // one 64-byte load of codes
constexpr int64_t kPairsPerChunk = 32;   // two vectors of 16 dwords
// 16 + l and 256 + 16 h: their sum is 272 + (q + 128) = 400 + q.
constexpr float kCodeBias = 400.0f;
// Weight rows ahead that a row prefetches (one sequential stream per thread), at least
// kStreamPrefetchBytes (stream_prefetch.h).
constexpr int64_t kMinRowsAhead = 2;

// The four products of a chunk's codes with row r's arranged inputs, in one fixed order, added
// into the row's block sum.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) inline void
AccumulateChunk(__m512i codes, const uint32_t* x, int64_t chunks, int64_t c, __m512 (&block_sum)[R]) {
  const __m512i mantissa = _mm512_set1_epi32(0x00780078);
  // 16.0 in both halves; 256.0 with the nibble's top bit set, to be flipped by the xor below.
  const __m512i sixteen = _mm512_set1_epi32(0x41804180);
  const __m512i flipped_256 = _mm512_set1_epi32(0x43C043C0);
  // 0xEA: (a & b) | c; 0x6A: (a & b) ^ c (c's bit 6 flips the nibble's top bit, its other bits
  // lie outside the mask: an or).
  const __m512bh low_a =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_slli_epi32(codes, 3), mantissa, sixteen, 0xEA);
  const __m512bh high_a =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(codes, 1), mantissa, flipped_256, 0x6A);
  const __m512bh low_b =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(codes, 5), mantissa, sixteen, 0xEA);
  const __m512bh high_b =
      (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(codes, 9), mantissa, flipped_256, 0x6A);
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    const uint32_t* xc = x + (r * chunks + c) * kPairsPerChunk;
    const __m512bh a = (__m512bh)_mm512_loadu_si512(xc);
    const __m512bh b = (__m512bh)_mm512_loadu_si512(xc + 16);
    __m512 dot = _mm512_dpbf16_ps(_mm512_setzero_ps(), low_a, a);
    dot = _mm512_dpbf16_ps(dot, high_a, a);
    dot = _mm512_dpbf16_ps(dot, low_b, b);
    dot = _mm512_dpbf16_ps(dot, high_b, b);
    block_sum[r] = _mm512_add_ps(block_sum[r], dot);
  }
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"))) void Chunk(
    const QuantOperands& op, const uint32_t* pairs, int64_t r0, int64_t n0, int64_t n1) {
  const int64_t chunks = op.in / kInputsPerChunk;
  const int64_t chunks_per_group = op.group_size / kInputsPerChunk;
  const int64_t row_bytes = op.groups * op.block_bytes;
  const int64_t rows_ahead = std::max(kMinRowsAhead, op.stream_rows_ahead);
  const uint32_t* x = pairs + r0 * chunks * kPairsPerChunk;
  const float* x_sums = op.x_group_sums + r0 * op.groups;
  float* y = op.y + r0 * op.out;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = op.w + n * row_bytes;
    const uint8_t* ahead = n + rows_ahead < op.out ? row + rows_ahead * row_bytes : row;
    __m512 acc[R];
    float offsets[R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_setzero_ps();
      offsets[r] = 0;
    }
    for (int64_t g = 0; g < op.groups; ++g) {
      const int64_t block_offset = g * op.block_bytes;
      const uint8_t* codes = row + block_offset + kPackedBlockHeaderBytes;
      const uint8_t* codes_ahead = ahead + block_offset + kPackedBlockHeaderBytes;
      __m512 block_sum[R];
      _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) block_sum[r] = _mm512_setzero_ps();
      AlignedCodeLines lines(codes);
      for (int64_t k = 0; k < chunks_per_group; ++k) {
        _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + k * kInputsPerChunk), _MM_HINT_T0);
        AccumulateChunk<R>(lines.Next(), x, chunks, g * chunks_per_group + k, block_sum);
      }
      const float scale = BlockScale(row + block_offset);
      const float shift = BlockOffset(row + block_offset) - kCodeBias * scale;
      const __m512 scales = _mm512_set1_ps(scale);
      _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(block_sum[r], scales, acc[r]);
        offsets[r] = __builtin_fmaf(shift, x_sums[r * op.groups + g], offsets[r]);
      }
    }
    StoreRowOutputs<R>(acc, offsets, op.bias, y, op.out, n);
  }
}

}  // namespace

bool Int8Bf16KernelRuns() { return PackedBf16KernelsRun(); }

bool Int8Bf16KernelApplies(const loader::PackedLayout& layout) {
  return PackedInGroupsOf(layout, 8, kInputsPerChunk);
}

void ArrangeInt8Bf16Inputs(const QuantOperands& op, base::CacheLineVector<uint32_t>* pairs) {
  const int64_t chunks = op.in / kInputsPerChunk;
  pairs->resize(static_cast<size_t>(op.rows * chunks * kPairsPerChunk));
  for (int64_t r = 0; r < op.rows; ++r) {
    const float* x = op.x + r * op.in;
    uint32_t* out = pairs->data() + r * chunks * kPairsPerChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      const float* xc = x + c * kInputsPerChunk;
      for (int i = 0; i < 16; ++i) {
        out[c * kPairsPerChunk + i] = Bf16BitsOf(xc[4 * i]) | (Bf16BitsOf(xc[4 * i + 2]) << 16);
        out[c * kPairsPerChunk + 16 + i] =
            Bf16BitsOf(xc[4 * i + 1]) | (Bf16BitsOf(xc[4 * i + 3]) << 16);
      }
    }
  }
}

void QuantizedRowsInt8Bf16(const QuantOperands& op, const uint32_t* pairs, int64_t n0, int64_t n1) {
  InPassesOfUpTo<8>(op.rows, [&](auto rows, int64_t r) {
    Chunk<decltype(rows)::value>(op, pairs, r, n0, n1);
  });
}

}  // namespace placer::model

#pragma GCC diagnostic pop
