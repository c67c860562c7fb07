// Float32 inputs as the digit kernels' 24-bit integers (quantized_int4_digits.h, digit_tiles.h):
// per block of 128 inputs v = round(x / t), t = max|x| / (127 · 2^16), cut into three signed
// bytes v = top · 2^16 + middle · 2^8 + low, each within [-127, 127]; |x - v · t| <= 2t.
// Inline, for kernels built with AVX-512F/BW/DQ.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

inline constexpr int64_t kDigitBlock = 128;
inline constexpr int64_t kDigitsPerInput = 3;  // top, middle, low
// The decode digit kernels' layout: per block, each span of 64 inputs as one 64-byte vector
// per digit.
inline constexpr int64_t kDigitSpan = 64;
inline constexpr int64_t kDigitSpansPerBlock = kDigitBlock / kDigitSpan;
inline constexpr int64_t kBlockDigitBytes = kDigitsPerInput * kDigitBlock;
// The largest |v|: 127 · 2^16, so that the top digit stays within [-127, 127].
inline constexpr float kDigitRange = 127.0f * 65536.0f;

// A block's scaling: the step t and how its inputs become integers.
struct DigitScale {
  float a = 0;        // max |x| (NaN or infinite where the block has a non-finite input)
  float step = 0;     // t = a / kDigitRange
  float inverse = 0;  // kDigitRange / a (0 for a zero block)
  bool tiny = false;  // the inverse overflows (a below ~2^-105): inputs are divided by a instead
};

// The block of kDigitBlock inputs at x. `group_sum` is the sum of its group's inputs: a
// NaN or an infinity there makes it one, and 0 · sum carries it into the step, so the block's
// products come out non-finite as a float kernel's would.
__attribute__((target("avx512f,avx512dq"), always_inline)) inline DigitScale DigitScaleOf(
    const float* x, float group_sum) {
  __m512 biggest = _mm512_setzero_ps();
  for (int64_t i = 0; i < kDigitBlock; i += 16) {
    biggest = _mm512_max_ps(biggest, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  }
  DigitScale scale;
  scale.a = _mm512_reduce_max_ps(biggest) + 0.0f * group_sum;
  scale.step = scale.a / kDigitRange;
  scale.inverse = scale.a > 0 ? kDigitRange / scale.a : 0.0f;
  scale.tiny = std::isinf(scale.inverse);
  return scale;
}

// 16 inputs' three digits (top, middle, low), one signed byte per input each.
__attribute__((target("avx512f,avx512bw,avx512dq"), always_inline)) inline void DigitsOf16(
    const float* x, const DigitScale& scale, __m128i digits[3]) {
  const __m512 inputs = _mm512_loadu_ps(x);
  const __m512 v_float =
      scale.tiny ? _mm512_mul_ps(_mm512_div_ps(inputs, _mm512_set1_ps(scale.a)),
                                 _mm512_set1_ps(kDigitRange))
                 : _mm512_mul_ps(inputs, _mm512_set1_ps(scale.inverse));
  const __m512i v = _mm512_cvtps_epi32(v_float);  // round to nearest even
  const __m512i low = _mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24);
  const __m512i rest = _mm512_srai_epi32(_mm512_sub_epi32(v, low), 8);
  const __m512i middle = _mm512_srai_epi32(_mm512_slli_epi32(rest, 24), 24);
  const __m512i top = _mm512_srai_epi32(_mm512_sub_epi32(rest, middle), 8);
  digits[0] = _mm512_cvtepi32_epi8(top);
  digits[1] = _mm512_cvtepi32_epi8(middle);
  digits[2] = _mm512_cvtepi32_epi8(low);
}

// A call's rows as a decode digit kernel reads them: per row and block of kDigitBlock inputs,
// the three digit bytes of each input, in the kernel's order, and the block's step.
template <class DigitByte>
struct RowDigits {
  base::CacheLineVector<DigitByte> digits;  // [rows, in / kDigitBlock, 3 · kDigitBlock]
  base::CacheLineVector<float> steps;       // [rows, in / kDigitBlock]: each block's t
};

// Every block of op's rows through `block(x, group_sum, digits, step)`, which writes one
// block's 3 · kDigitBlock digit bytes and its step. op's groups are multiples of kDigitBlock.
template <class DigitByte, class Block>
void DigitsOfEveryBlock(const QuantOperands& op, Block block, RowDigits<DigitByte>* out) {
  const int64_t blocks = op.in / kDigitBlock;
  const int64_t blocks_per_group = op.group_size / kDigitBlock;
  out->digits.resize(static_cast<size_t>(op.rows * blocks * 3 * kDigitBlock));
  out->steps.resize(static_cast<size_t>(op.rows * blocks));
  for (int64_t r = 0; r < op.rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      block(op.x + r * op.in + b * kDigitBlock, op.x_group_sums[r * op.groups + b / blocks_per_group],
            out->digits.data() + (r * blocks + b) * 3 * kDigitBlock, out->steps.data() + r * blocks + b);
    }
  }
}

}  // namespace placer::model
