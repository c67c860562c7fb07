#include "loader/quantized_group.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace placer::loader {
namespace {

// at::round (nearbyint in the default rounding mode: halves to even, the sign of zero kept) in
// operations the compiler vectorizes: below 2^23, adding and taking away 2^23 (with v's sign)
// leaves the nearest integer, ties to even; from 2^23 on (and inf, NaN) a float is its own
// rounding.
inline float RoundHalfEven(float v) {
  constexpr float kTwo23 = 8388608.0f;
  const float magic = std::copysign(kTwo23, v);
  const float rounded = std::copysign((v + magic) - magic, v);
  return std::fabs(v) < kTwo23 ? rounded : v;
}

// A rounded code clamped to [low, high] as the stored integer. NaN (its group held a NaN, so
// its scale is NaN and the whole group dequantizes to NaN) stores 0, as the tensor formula's
// conversion of NaN to int32 (INT32_MIN) did in its low bits. Branch-free, to vectorize.
inline int32_t StoredCode(float code, float low, float high) {
  const float clamped = std::min(std::max(code, low), high);  // NaN stays NaN
  return static_cast<int32_t>(clamped == clamped ? clamped : 0.0f);
}

// The lowest and highest of n floats (of their magnitudes if `absolute`; NaN for both if one
// is NaN, as at::amin / at::amax give). SSE's min and max: GCC does not vectorize a float min or
// max reduction that must keep NaN and signed zeros (-ffinite-math-only would fold NaN checks).
void RangeOf(const float* x, int64_t n, bool absolute, float* lowest, float* highest) {
  const __m128 sign = _mm_set1_ps(-0.0f);
  __m128 low = _mm_set1_ps(absolute ? 0.0f : x[0]);
  __m128 high = low, nan = _mm_setzero_ps();
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    __m128 v = _mm_loadu_ps(x + k);
    if (absolute) v = _mm_andnot_ps(sign, v);
    nan = _mm_or_ps(nan, _mm_cmpunord_ps(v, v));
    low = _mm_min_ps(low, v);
    high = _mm_max_ps(high, v);
  }
  float lows[4], highs[4];
  _mm_storeu_ps(lows, low);
  _mm_storeu_ps(highs, high);
  bool any_nan = _mm_movemask_ps(nan) != 0;
  for (; k < n; ++k) {
    const float v = absolute ? std::fabs(x[k]) : x[k];
    any_nan |= v != v;
    lows[0] = std::min(lows[0], v);
    highs[0] = std::max(highs[0], v);
  }
  for (int j = 1; j < 4; ++j) {
    lows[0] = std::min(lows[0], lows[j]);
    highs[0] = std::max(highs[0], highs[j]);
  }
  *lowest = any_nan ? std::numeric_limits<float>::quiet_NaN() : lows[0];
  *highest = any_nan ? std::numeric_limits<float>::quiet_NaN() : highs[0];
}

}  // namespace

void QuantizeGroup(const float* x, int64_t n, int bits, int32_t* codes, uint8_t* block) {
  float scale = 0.0f, offset = 0.0f, low = 0.0f, high = 0.0f;
  if (bits == 8) {
    RangeOf(x, n, /*absolute=*/true, &low, &high);
    scale = high / 127.0f;
    const float safe = scale > 0 ? scale : 1.0f;
    for (int64_t k = 0; k < n; ++k) codes[k] = StoredCode(RoundHalfEven(x[k] / safe), -127.0f, 127.0f);
  } else {
    RangeOf(x, n, /*absolute=*/false, &low, &high);
    scale = (high - low) / 15.0f;
    const float safe = scale > 0 ? scale : 1.0f;
    const float zero = scale > 0 ? RoundHalfEven(-low / safe) : 0.0f;
    for (int64_t k = 0; k < n; ++k) codes[k] = StoredCode(RoundHalfEven(x[k] / safe) + zero, 0.0f, 15.0f);
    offset = -zero * scale;
  }
  std::memcpy(block, &scale, sizeof(float));
  std::memcpy(block + sizeof(float), &offset, sizeof(float));
  uint8_t* payload = block + kPackedBlockHeaderBytes;
  if (bits == 8) {
    for (int64_t k = 0; k < n; ++k) payload[k] = static_cast<uint8_t>(codes[k]);
  } else {
    // Runs of 32 inputs (4-bit groups are multiples of 32): input j low, input j + 16 high.
    for (int64_t run = 0; run < n; run += 32) {
      for (int j = 0; j < 16; ++j) {
        payload[run / 2 + j] = static_cast<uint8_t>((codes[run + j] & 0xF) | ((codes[run + 16 + j] & 0xF) << 4));
      }
    }
  }
}

}  // namespace placer::loader
