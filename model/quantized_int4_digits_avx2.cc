// The AVX2 form of the 4-bit x three-digit kernel (quantized_int4_digits_avx2.h says why).
//
// A 64-input span's 32 payload bytes hold inputs 0-15 and 32-47 in their low nibbles, 16-31 and
// 48-63 in their high ones; masked (low) and shifted right by 4 and masked (high), they are the
// span's lanes 0-31 and 32-63 in DigitsOfRows' order, so each vpmaddubsw pairs codes and digits
// of the same inputs.
#include "model/quantized_int4_digits_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "model/packed_block_header.h"
#include "model/row_passes.h"
#include "model/vector_sum.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

// Whole weight rows ahead that a row prefetches, at least (quantized_int4_bf16.cc's reason);
// op.stream_rows_ahead makes it kStreamPrefetchBytes on narrow rows.
constexpr int64_t kMinRowsAhead = 4;

bool CpuRunsIt() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

__attribute__((target("avx2"), always_inline)) inline __m256i Load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 8 inputs' three digits as int32 lanes, as input_digits.h's DigitsOf16 makes them.
__attribute__((target("avx2,fma"), always_inline)) inline void DigitsOf8(const float* x,
                                                                         const DigitScale& scale,
                                                                         __m256i digits[3]) {
  const __m256 inputs = _mm256_loadu_ps(x);
  const __m256 v_float =
      scale.tiny ? _mm256_mul_ps(_mm256_div_ps(inputs, _mm256_set1_ps(scale.a)),
                                 _mm256_set1_ps(kDigitRange))
                 : _mm256_mul_ps(inputs, _mm256_set1_ps(scale.inverse));
  const __m256i v = _mm256_cvtps_epi32(v_float);  // round to nearest even
  const __m256i low = _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24);
  const __m256i rest = _mm256_srai_epi32(_mm256_sub_epi32(v, low), 8);
  const __m256i middle = _mm256_srai_epi32(_mm256_slli_epi32(rest, 24), 24);
  digits[0] = _mm256_srai_epi32(_mm256_sub_epi32(rest, middle), 8);
  digits[1] = middle;
  digits[2] = low;
}

// Rows r0..r0+R-1's 8-lane sums over weight row n: per block, (S0 · 2^16 + S1 · 2^8 + S2) ·
// (s · t), the codes unpacked once for the R rows; each row's arithmetic is the same at any R.
template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void RowLanes(
    const QuantOperands& op, const Int4Digits& xd, int64_t r0, int64_t n, __m256 (&acc)[R],
    float (&offsets)[R]) {
  const int64_t row_bytes = op.groups * op.block_bytes;
  const uint8_t* row = op.w + n * row_bytes;
  const int64_t rows_ahead = std::max(kMinRowsAhead, op.stream_rows_ahead);
  const uint8_t* ahead = n + rows_ahead < op.out ? row + rows_ahead * row_bytes : row;
  const int64_t blocks_per_group = op.group_size / kDigitBlock;
  const int64_t blocks = op.in / kDigitBlock;
  const int8_t* digits = xd.digits.data() + r0 * blocks * kBlockDigitBytes;
  const float* steps = xd.steps.data() + r0 * blocks;
  const float* group_sums = op.x_group_sums + r0 * op.groups;
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i radix = _mm256_set1_epi16(256);
  _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    offsets[r] = 0;
  }
  for (int64_t g = 0; g < op.groups; ++g) {
    const uint8_t* block = row + g * op.block_bytes;
    const float scale = BlockScale(block);
    const float offset = BlockOffset(block);
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
      offsets[r] = std::fma(offset, group_sums[r * op.groups + g], offsets[r]);
    }
    const uint8_t* codes = block + kPackedBlockHeaderBytes;
    const uint8_t* codes_ahead = ahead + g * op.block_bytes + kPackedBlockHeaderBytes;
    for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
      const int64_t b = g * blocks_per_group + bb;
      const uint8_t* bytes = codes + bb * (kDigitBlock / 2);
      // A block's 64 code bytes may straddle two cache lines (blocks are not line-aligned).
      _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + bb * (kDigitBlock / 2)), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + bb * (kDigitBlock / 2) + 63),
                   _MM_HINT_T0);
      __m256i q[4];  // span 0 lanes 0-31, 32-63; span 1 lanes 0-31, 32-63
      _Pragma("GCC unroll 2") for (int span = 0; span < 2; ++span) {
        const __m256i packed =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 32 * span));
        q[2 * span] = _mm256_and_si256(packed, low_nibbles);
        q[2 * span + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
      }
      _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
        const int8_t* d = digits + (r * blocks + b) * kBlockDigitBytes;
        __m256i sums[kDigitsPerInput];
        _Pragma("GCC unroll 3") for (int j = 0; j < kDigitsPerInput; ++j) {
          const int8_t* span0 = d + j * kDigitSpan;
          const int8_t* span1 = span0 + kDigitsPerInput * kDigitSpan;
          const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], Load32(span0)),
                                             _mm256_maddubs_epi16(q[1], Load32(span0 + 32)));
          const __m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(q[2], Load32(span1)),
                                             _mm256_maddubs_epi16(q[3], Load32(span1 + 32)));
          sums[j] = _mm256_add_epi16(a, c);
        }
        __m256i value = _mm256_add_epi32(_mm256_madd_epi16(sums[0], radix),
                                         _mm256_madd_epi16(sums[1], ones));
        value = _mm256_add_epi32(_mm256_slli_epi32(value, 8), _mm256_madd_epi16(sums[2], ones));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(value),
                                 _mm256_set1_ps(scale * steps[r * blocks + b]), acc[r]);
      }
    }
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void RowOutputs(const QuantOperands& op, const Int4Digits& xd,
                                                    int64_t r0, int64_t n0, int64_t n1) {
  float* y = op.y + r0 * op.out;
  for (int64_t n = n0; n < n1; ++n) {
    __m256 sums[R];
    float offsets[R];
    RowLanes<R>(op, xd, r0, n, sums, offsets);
    const float bias = op.bias != nullptr ? op.bias[n] : 0.0f;
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
      y[r * op.out + n] = (HorizontalSum256(sums[r]) + offsets[r]) + bias;
    }
  }
}

}  // namespace

bool Int4DigitsAvx2Runs() {
  static const bool runs = CpuRunsIt();
  return runs;
}

__attribute__((target("avx2,fma"))) void DigitsOfBlockAvx2(const float* x, float group_sum,
                                                           int8_t* digits, float* step) {
  __m256 biggest = _mm256_setzero_ps();
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t i = 0; i < kDigitBlock; i += 8) {
    biggest = _mm256_max_ps(biggest, _mm256_and_ps(_mm256_loadu_ps(x + i), magnitude));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, biggest);
  DigitScale scale;
  // A NaN lane is dropped by vmaxps (it returns its second operand); the group sum carries it.
  scale.a = *std::max_element(lanes, lanes + 8) + 0.0f * group_sum;
  scale.step = scale.a / kDigitRange;
  scale.inverse = scale.a > 0 ? kDigitRange / scale.a : 0.0f;
  scale.tiny = std::isinf(scale.inverse);
  *step = scale.step;
  // Within a 64-input span, lanes 16k..16k+15 hold inputs kFirstInput[k]..+15.
  static constexpr int kFirstInput[4] = {0, 32, 16, 48};
  for (int64_t span = 0; span < kDigitSpansPerBlock; ++span) {
    int8_t* out = digits + span * kDigitsPerInput * kDigitSpan;
    for (int k = 0; k < 4; ++k) {
      __m256i first[kDigitsPerInput], second[kDigitsPerInput];  // inputs +0..7, +8..15
      DigitsOf8(x + span * kDigitSpan + kFirstInput[k], scale, first);
      DigitsOf8(x + span * kDigitSpan + kFirstInput[k] + 8, scale, second);
      for (int j = 0; j < kDigitsPerInput; ++j) {
        // Every digit fits an int8, so the saturating packs are exact; packs_epi32 interleaves
        // the two vectors' 128-bit halves, which the permute puts back in input order. (Was a
        // store and 8 byte copies per digit and 8 inputs: ~2 % of a small-preset int4 decode
        // step's samples, on the calling thread while the helpers waited.)
        const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(first[j], second[j]), 0xD8);
        const __m128i bytes =
            _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j * kDigitSpan + 16 * k), bytes);
      }
    }
  }
}

void QuantizedRowsInt4DigitsAvx2(const QuantOperands& op, const Int4Digits& digits, int64_t n0,
                                 int64_t n1) {
  InPassesOfUpTo<4>(op.rows, [&](auto rows, int64_t r) {
    RowOutputs<decltype(rows)::value>(op, digits, r, n0, n1);
  });
}

}  // namespace placer::model
