// The 4-bit x three-digit kernel's AVX-512 form and the choice of form
// (quantized_int4_digits.h says what it promises; the AVX2 form: quantized_int4_digits_avx2.cc).
//
// Codes unpack as in quantized_vnni.cc: a 64-input span's 32 payload bytes, broadcast to both
// halves of a register and shifted right by 0 or 4, masked to 0x0F: inputs 0-15, 32-47, 16-31,
// 48-63. The digits are stored in that order, so each int32 lane of vpdpbusd sums four products
// of the same inputs on both sides. A 128-input block is two spans: per digit j, two vpdpbusd
// give S_j = sum(q · d_j) exactly (|S_j| <= 128 · 15 · 128 < 2^22), read as a float by the bias
// trick of quantized_vnni.cc (no vcvtdq2ps on the VNNI port).
#include "model/quantized_int4_digits.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "model/packed_block_header.h"
#include "model/quantized_int4_digits_avx2.h"
#include "model/digit_row_outputs.h"
#include "model/row_passes.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

// Weight rows ahead that a row prefetches (quantized_int4_bf16.cc's reason).
constexpr int64_t kRowsAhead = 4;

bool CpuRunsIt() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

// One row's block b: digits of inputs [128 b, 128 b + 128) in the unpack order, and its step.
__attribute__((target("avx512f,avx512bw,avx512dq"))) void DigitsOfBlock(const float* x,
                                                                         float group_sum,
                                                                         int8_t* digits,
                                                                         float* step) {
  const DigitScale scale = DigitScaleOf(x, group_sum);
  *step = scale.step;
  for (int64_t s = 0; s < kDigitSpansPerBlock; ++s) {
    int8_t* out = digits + s * kDigitsPerInput * kDigitSpan;
    for (int k = 0; k < 4; ++k) {
      // Unpack lanes 16k..16k+15 hold inputs: k = 0: 0-15, 1: 32-47, 2: 16-31, 3: 48-63.
      static constexpr int kFirstInput[4] = {0, 32, 16, 48};
      __m128i split[kDigitsPerInput];
      DigitsOf16(x + s * kDigitSpan + kFirstInput[k], scale, split);
      for (int j = 0; j < kDigitsPerInput; ++j) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j * kDigitSpan + 16 * k), split[j]);
      }
    }
  }
}

// The kernel's lane sums, for DigitRowOutputs (digit_row_outputs.h).
struct Lanes {
  // Rows r0..r0+R-1's 16-lane sums over weight row n: per block, (S0 · 2^16 + S1 · 2^8 + S2) ·
  // (s · t), the codes unpacked once for the R rows; each row's arithmetic is the same at any R.
  template <int R>
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni,fma"), always_inline)) static void
  RowLanes(const QuantOperands& op, const Int4Digits& xd, int64_t r0, int64_t n, __m512 (&acc)[R],
           float (&offsets)[R]) {
    const int64_t row_bytes = op.groups * op.block_bytes;
    const uint8_t* row = op.w + n * row_bytes;
    const uint8_t* ahead = n + kRowsAhead < op.out ? row + kRowsAhead * row_bytes : row;
    const int64_t blocks_per_group = op.group_size / kDigitBlock;
    const int64_t blocks = op.in / kDigitBlock;
    const int8_t* digits = xd.digits.data() + r0 * blocks * kBlockDigitBytes;
    const float* steps = xd.steps.data() + r0 * blocks;
    const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
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
      const uint8_t* codes = block + kPackedBlockHeaderBytes;
      const uint8_t* codes_ahead = ahead + g * op.block_bytes + kPackedBlockHeaderBytes;
      for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
        const int64_t b = g * blocks_per_group + bb;
        const uint8_t* bytes = codes + bb * (kDigitBlock / 2);
        _mm_prefetch(reinterpret_cast<const char*>(codes_ahead + bb * (kDigitBlock / 2)), _MM_HINT_T0);
        const __m512i w0 = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(bytes))), shifts), low_nibbles);
        const __m512i w1 = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(bytes + 32))), shifts), low_nibbles);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
          const int8_t* d = digits + (r * blocks + b) * kBlockDigitBytes;
          __m512 part[kDigitsPerInput];
          _Pragma("GCC unroll 3") for (int j = 0; j < kDigitsPerInput; ++j) {
            const int8_t* digit = d + j * kDigitSpan;
            __m512i dot = _mm512_dpbusd_epi32(float_bias_bits, w0, _mm512_loadu_si512(digit));
            dot = _mm512_dpbusd_epi32(dot, w1,
                                      _mm512_loadu_si512(digit + kDigitsPerInput * kDigitSpan));
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

bool DigitsVnniRuns() {
  static const bool runs = CpuRunsIt();
  return runs;
}

std::vector<Int4DigitsIsa> RunnableInt4DigitsIsas() {
  std::vector<Int4DigitsIsa> isas;
  if (DigitsVnniRuns()) isas.push_back(Int4DigitsIsa::kAvx512Vnni);
  if (Int4DigitsAvx2Runs()) isas.push_back(Int4DigitsIsa::kAvx2);
  return isas;
}

Int4DigitsIsa DetectInt4DigitsIsa() {
  static const Int4DigitsIsa best = [] {
    const std::vector<Int4DigitsIsa> isas = RunnableInt4DigitsIsas();
    return isas.empty() ? Int4DigitsIsa::kNone : isas.front();
  }();
  return best;
}

const char* Int4DigitsIsaName(Int4DigitsIsa isa) {
  switch (isa) {
    case Int4DigitsIsa::kAvx512Vnni: return "AVX512-VNNI";
    case Int4DigitsIsa::kAvx2: return "AVX2";
    case Int4DigitsIsa::kNone: break;
  }
  return "none";
}

bool Int4DigitsKernelRuns() { return DetectInt4DigitsIsa() != Int4DigitsIsa::kNone; }

bool Int4DigitsKernelApplies(const loader::PackedLayout& layout) {
  return layout.bits == 4 && layout.group_size > 0 && layout.group_size % kDigitBlock == 0 &&
         layout.in % layout.group_size == 0;
}

void DigitsOfRows(const QuantOperands& op, Int4Digits* out) {
  if (DigitsVnniRuns()) {
    DigitsOfEveryBlock(op, DigitsOfBlock, out);
  } else {
    DigitsOfEveryBlock(op, DigitsOfBlockAvx2, out);
  }
}

void QuantizedRowsInt4Digits(const QuantOperands& op, const Int4Digits& digits, int64_t n0,
                             int64_t n1, Int4DigitsIsa isa) {
  if (isa == Int4DigitsIsa::kAvx2) return QuantizedRowsInt4DigitsAvx2(op, digits, n0, n1);
  InPassesOfUpTo<4>(op.rows, [&](auto rows, int64_t r) {
    DigitRowOutputs<Lanes, decltype(rows)::value>(op, digits, r, n0, n1);
  });
}

}  // namespace placer::model

#pragma GCC diagnostic pop
