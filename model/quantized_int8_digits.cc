// The 8-bit x three-digit kernel (quantized_int8_digits.h says what it promises).
//
// A 64-input span's codes are one 64-byte vector in input order (read as aligned cache lines,
// aligned_code_lines.h: a block's codes start 8 bytes past a line), so each int32 lane of
// vpdpbusd sums four products of the same inputs on both sides, and a 128-input block's lane
// sums eight. Per digit j, two vpdpbusd give the lanes' S_j exactly: |S_j| <= 8 · 128 · 255 <
// 2^22 (the top digit's less its code sum, 2^7 · the lane's sum of q, started below the bias),
// so each is read as a float by quantized_vnni.cc's bias trick.
#include "model/quantized_int8_digits.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "model/aligned_code_lines.h"
#include "model/input_digits.h"
#include "model/packed_block_header.h"
#include "model/quantized_int4_digits.h"
#include "model/digit_row_outputs.h"
#include "model/row_passes.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

// Weight rows ahead that a row prefetches: at least kStreamPrefetchBytes (stream_prefetch.h),
// and at least 4, as the int8-activation kernel's one-row tiles do. ~1.1B int8 decode step
// (placer-bench-model decode ... --quantize int8 --quantize-lm-head int8 --new-tokens 32,
// alternating rounds, an Emerald Rapids VM): 4 rows against kStreamPrefetchBytes' 2-4, 0.970 and
// 0.966 of the step (5 and 6 rounds); 8 rows 1.064.
constexpr int64_t kMinRowsAhead = 4;

// One row's block: the bytes of v + 2^23 of inputs [0, 128) at x, per span, and its step.
__attribute__((target("avx512f,avx512bw,avx512dq"))) void DigitsOfBlock(const float* x,
                                                                         float group_sum,
                                                                         uint8_t* digits,
                                                                         float* step) {
  const DigitScale scale = DigitScaleOf(x, group_sum);
  *step = scale.step;
  for (int64_t s = 0; s < kDigitSpansPerBlock; ++s) {
    uint8_t* out = digits + s * kDigitsPerInput * kDigitSpan;
    for (int k = 0; k < kDigitSpan / 16; ++k) {
      __m128i split[kDigitsPerInput];
      DigitsOf16(x + s * kDigitSpan + 16 * k, scale, split);
      // v + 2^23 from v's signed bytes: the unsigned bytes of top · 2^16 + middle · 2^8 + low
      // + 2^23, carried from the low byte up.
      const __m512i low = _mm512_cvtepi8_epi32(split[2]);
      const __m512i middle = _mm512_cvtepi8_epi32(split[1]);
      const __m512i top = _mm512_cvtepi8_epi32(split[0]);
      const __m512i v = _mm512_add_epi32(
          _mm512_add_epi32(_mm512_slli_epi32(top, 16), _mm512_slli_epi32(middle, 8)),
          _mm512_add_epi32(low, _mm512_set1_epi32(1 << 23)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * k),
                       _mm512_cvtepi32_epi8(_mm512_srli_epi32(v, 16)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kDigitSpan + 16 * k),
                       _mm512_cvtepi32_epi8(_mm512_srli_epi32(v, 8)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * kDigitSpan + 16 * k),
                       _mm512_cvtepi32_epi8(v));
    }
  }
}

// The kernel's lane sums, for DigitRowOutputs (digit_row_outputs.h).
struct Lanes {
  // Rows r0..r0+R-1's 16-lane sums over weight row n: per block, (S0 · 2^16 + S1 · 2^8 + S2) ·
  // (s · t), the codes loaded and summed once for the R rows; each row's arithmetic is the same
  // at any R.
  template <int R>
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni,fma"), always_inline)) static void
  RowLanes(const QuantOperands& op, const Int8Digits& xd, int64_t r0, int64_t n, __m512 (&acc)[R],
           float (&offsets)[R]) {
    const int64_t row_bytes = op.groups * op.block_bytes;
    const int64_t rows_ahead = std::max(kMinRowsAhead, op.stream_rows_ahead);
    const uint8_t* row = op.w + n * row_bytes;
    const uint8_t* ahead = n + rows_ahead < op.out ? row + rows_ahead * row_bytes : row;
    const int64_t blocks_per_group = op.group_size / kDigitBlock;
    const int64_t blocks = op.in / kDigitBlock;
    const uint8_t* digits = xd.digits.data() + r0 * blocks * kBlockDigitBytes;
    const float* steps = xd.steps.data() + r0 * blocks;
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i float_bias_bits = _mm512_set1_epi32(0x4B400000);
    const __m512 float_bias = _mm512_castsi512_ps(float_bias_bits);
    const __m512 radix = _mm512_set1_ps(256.0f);
    const __m512 radix2 = _mm512_set1_ps(65536.0f);
    const float* group_sums = op.x_group_sums + r0 * op.groups;
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_setzero_ps();
      offsets[r] = 0;
    }
    for (int64_t g = 0; g < op.groups; ++g) {
      const uint8_t* block = row + g * op.block_bytes;
      const float scale = BlockScale(block);
      const float offset = BlockOffset(block);
      _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
        offsets[r] = std::fma(offset, group_sums[r * op.groups + g], offsets[r]);
      }
      const uint8_t* codes_ahead = ahead + g * op.block_bytes + kPackedBlockHeaderBytes;
      AlignedCodeLines lines(block + kPackedBlockHeaderBytes);
      for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
        const int64_t b = g * blocks_per_group + bb;
        _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + bb * kDigitBlock), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + bb * kDigitBlock + kDigitSpan),
                     _MM_HINT_T0);
        const __m512i w0 = lines.Next();
        const __m512i w1 = lines.Next();
        const __m512i code_sums =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, w0), ones, w1);
        const __m512i top_start = _mm512_sub_epi32(float_bias_bits, _mm512_slli_epi32(code_sums, 7));
        _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
          const uint8_t* d = digits + (r * blocks + b) * kBlockDigitBytes;
          __m512 part[kDigitsPerInput];
          _Pragma("GCC unroll 3") for (int j = 0; j < kDigitsPerInput; ++j) {
            __m512i dot = _mm512_dpbusd_epi32(j == 0 ? top_start : float_bias_bits,
                                              _mm512_loadu_si512(d + j * kDigitSpan), w0);
            dot = _mm512_dpbusd_epi32(
                dot, _mm512_loadu_si512(d + (kDigitsPerInput + j) * kDigitSpan), w1);
            part[j] = _mm512_sub_ps(_mm512_castsi512_ps(dot), float_bias);
          }
          const __m512 value =
              _mm512_fmadd_ps(part[0], radix2, _mm512_fmadd_ps(part[1], radix, part[2]));
          acc[r] = _mm512_fmadd_ps(value, _mm512_set1_ps(scale * steps[r * blocks + b]), acc[r]);
        }
      }
    }
  }
};

}  // namespace

// The same instructions as the 4-bit digits kernel's.
bool Int8DigitsKernelRuns() { return DigitsVnniRuns(); }

bool Int8DigitsKernelApplies(const loader::PackedLayout& layout) {
  return layout.bits == 8 && layout.group_size > 0 && layout.group_size % kDigitBlock == 0 &&
         layout.in % layout.group_size == 0;
}

void Int8DigitsOfRows(const QuantOperands& op, Int8Digits* out) {
  DigitsOfEveryBlock(op, DigitsOfBlock, out);
}

void QuantizedRowsInt8Digits(const QuantOperands& op, const Int8Digits& digits, int64_t n0,
                             int64_t n1) {
  InPassesOfUpTo<4>(op.rows, [&](auto rows, int64_t r) {
    DigitRowOutputs<Lanes, decltype(rows)::value>(op, digits, r, n0, n1);
  });
}

}  // namespace placer::model

#pragma GCC diagnostic pop
