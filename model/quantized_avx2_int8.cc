// The --quantize-activations int8 kernel (4- and 8-bit weights) for CPUs without AVX-512: the
// AVX-512 kernel's arithmetic (quantized_vnni.cc) on two 8-lane halves, with AVX-VNNI's 256-bit
// vpdpbusd (Alder Lake and later client cores) or, on plain AVX2 (Zen 2/3, Haswell to Skylake
// client cores), vpmaddubsw and vpmaddwd, as llama.cpp multiplies Q8_0 and Q4_0 blocks there.
// Each 512-bit vector there is a pair of 256-bit ones here (lanes 0-7, 8-15), every lane gets the
// same integer dot product and the same float operations, and the lanes are summed in the order
// of GCC's _mm512_reduce_add_ps: so all three kernels give the same bits (tested where two run).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "model/quantized_vnni.h"
#include "model/packed_block_header.h"
#include "model/vnni_span.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kBlock = 128;  // activation block, as quantized_vnni.cc's (64 for 4-bit groups of 64)

// acc plus, in each int32 lane, the four products of its unsigned bytes of u with the signed bytes
// of s. AVX-VNNI's vpdpbusd is written as assembly so that one template, built for AVX2 and FMA
// only, serves both ISAs: a function built with target("avxvnni") lets the compiler use VNNI
// instructions anywhere in it, which the AVX2 instantiation must never run. The AVX2 form sums
// pairs of products into int16 lanes first (vpmaddubsw saturates there): exact while no pair
// passes 32767, which the callers keep (4-bit codes 2 · 15 · 127; 8-bit codes as magnitudes,
// their signs moved onto the activations: 2 · 128 · 127). ("%{vex%}": braces escaped for asm.)
template <bool kVnni>
__attribute__((target("avx2,fma"), always_inline)) inline __m256i AddProducts(__m256i acc, __m256i u,
                                                                              __m256i s) {
  if constexpr (kVnni) {
    asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
    return acc;
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
}

// The int32 lanes of AddProducts<false>(AddProducts<false>(0, w0, x0), w1, x1) (w1 · x1 only
// where kTwoSpans), in fewer instructions and registers, which on AVX2's 16 registers keeps a
// 4-row tile's accumulators out of memory: 4-bit codes' pairs of products (at most
// 2 · 15 · 127 each) are summed as int16 before the one vpmaddwd, 8-bit ones (2 · 128 · 127)
// cannot be. The lanes are the same integers, and converting them (below 2^24) is exact, as the
// VNNI form's float-bias trick: so the same bits.
template <int Bits, bool kTwoSpans>
__attribute__((target("avx2,fma"), always_inline)) inline __m256i DotAvx2(__m256i w0, __m256i x0,
                                                                          __m256i w1, __m256i x1) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i pairs0 = _mm256_maddubs_epi16(w0, x0);
  if constexpr (!kTwoSpans) {
    return _mm256_madd_epi16(pairs0, ones);
  } else if constexpr (Bits == 4) {
    return _mm256_madd_epi16(_mm256_add_epi16(pairs0, _mm256_maddubs_epi16(w1, x1)), ones);
  } else {
    return _mm256_add_epi32(_mm256_madd_epi16(pairs0, ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(w1, x1), ones));
  }
}

// _mm512_reduce_add_ps of the vector whose lanes 0-7 are `low` and 8-15 `high`: halves added,
// then 128-bit halves, then lanes i + i+2, then the two left.
__attribute__((target("avx2,fma"), always_inline)) inline float SumLikeAvx512(__m256 low,
                                                                               __m256 high) {
  const __m256 eight = _mm256_add_ps(high, low);
  const __m128 four = _mm_add_ps(_mm256_extractf128_ps(eight, 1), _mm256_castps256_ps128(eight));
  float lane[4];
  _mm_storeu_ps(lane, four);
  return (lane[0] + lane[2]) + (lane[1] + lane[3]);
}

// The weight row whose bytes row n's pass prefetches. Where one pass over the weight takes every
// input row (at most 4: decode steps), op.stream_rows_ahead rows on (at least
// kStreamPrefetchBytes, as the other packed kernels read their stream): one row ahead, ~430
// bytes of the small preset's 4-bit rows, left DRAM's latency exposed (`placer-bench-model
// quantized-products --rows 1`, int4_g128 int8_activations, medians of 8 alternating runs on a
// Zen 3: 2.65 ms one row ahead, 2.21 this far). Longer chunks pass over a task's rows once per 4
// input rows and keep one row ahead: from the second pass the rows come from cache, and a far
// prefetch reads past the task (32 rows: 34.0 ms against 29.8 one row ahead, 5 runs each).
// Near the end, row n itself, so the pointer stays inside the weight.
inline int64_t StreamRow(const QuantOperands& op, int64_t n) {
  const int64_t ahead = n + (op.rows <= 4 ? std::max<int64_t>(1, op.stream_rows_ahead) : 1);
  return ahead < op.out ? ahead : std::min(n + 1, op.out - 1);
}

// Output n of rows r0..r0+R-1 from their lane sums: the AVX-512 tile's end (EndTile).
template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void EndRow(
    const QuantOperands& op, const uint8_t* row, const __m256 (&low)[R], const __m256 (&high)[R],
    int64_t r0, int64_t n) {
  const float bias = op.bias != nullptr ? op.bias[n] : 0.0f;
  for (int r = 0; r < R; ++r) {
    const float* group_sums = op.x_group_sums + (r0 + r) * op.groups;
    float offsets = 0;
    for (int64_t g = 0; g < op.groups; ++g) {
      offsets = __builtin_fmaf(BlockOffset(row + g * op.block_bytes), group_sums[g],
                               offsets);
    }
    op.y[(r0 + r) * op.out + n] = SumLikeAvx512(low[r], high[r]) + offsets + bias;
  }
}

// Outputs n of input rows r0..r0+R-1: TileVnni<R, 1, Bits, Block>'s integer dots and float
// operations, lane for lane.
template <bool kVnni, int R, int Bits, int Block = kBlock>
__attribute__((target("avx2,fma"))) void Row256(const QuantOperands& op,
                                                            const Int8Activations& xa,
                                                            int64_t r0, int64_t n) {
  const int64_t in = op.in, groups = op.groups;
  constexpr bool kTwoSpans = Block == 128;  // else one span of 4-bit codes (groups of 64)
  const int64_t blocks_per_group = op.group_size / Block;
  const int64_t blocks = in / Block;
  __m256 low[R], high[R];
  for (int r = 0; r < R; ++r) low[r] = high[r] = _mm256_setzero_ps();
  const uint8_t* row = op.w + n * groups * op.block_bytes;
  const uint8_t* next = op.w + StreamRow(op, n) * groups * op.block_bytes;
  const int8_t* codes = xa.codes.data() + r0 * in;
  const float* activation_scales = xa.scales.data() + r0 * blocks;
  const __m256i sign_bits = _mm256_set1_epi8(static_cast<char>(0x80));  // also the byte 128
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i float_bias_bits = _mm256_set1_epi32(0x4B400000);
  const __m256 float_bias = _mm256_castsi256_ps(float_bias_bits);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* block = row + g * op.block_bytes;
    const __m256 scale = _mm256_set1_ps(BlockScale(block));
    const uint8_t* p = block + kPackedBlockHeaderBytes;
    for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
      const int64_t b = g * blocks_per_group + bb;
      const int64_t block_payload = Block * Bits / 8;
      const uint8_t* bytes = p + bb * block_payload;
      const uint8_t* ahead = next + g * op.block_bytes + kPackedBlockHeaderBytes + bb * block_payload;
      __m256i w0_low, w0_high, w1_low, w1_high;
      // 8-bit codes on AVX2: their signs, moved onto the activations row by row.
      __m256i signs[4] = {};
      if constexpr (Bits == 8) {
        // The AVX-512 kernel's w0 is bytes 0-63 (its lanes 0-7 the low half here, 8-15 the
        // high one), w1 bytes 64-127. VNNI multiplies q + 128 (the sign bit flipped); AVX2
        // |q|, whose products with the activations' codes stay within vpmaddubsw's int16.
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + 64), _MM_HINT_T0);
        __m256i* const codes8[4] = {&w0_low, &w0_high, &w1_low, &w1_high};
        for (int i = 0; i < 4; ++i) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 32 * i));
          if constexpr (kVnni) {
            *codes8[i] = _mm256_xor_si256(raw, sign_bits);
          } else {
            signs[i] = raw;
            *codes8[i] = _mm256_abs_epi8(raw);
          }
        }
      } else {
        // The AVX-512 kernel's w0 is these 32 bytes' low nibbles then their high nibbles; w1
        // the next 32 bytes' likewise.
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        const __m256i raw0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
        w0_low = _mm256_and_si256(raw0, low_nibbles);
        w0_high = _mm256_and_si256(_mm256_srli_epi16(raw0, 4), low_nibbles);
        w1_low = w1_high = _mm256_setzero_si256();
        if constexpr (kTwoSpans) {
          const __m256i raw1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 32));
          w1_low = _mm256_and_si256(raw1, low_nibbles);
          w1_high = _mm256_and_si256(_mm256_srli_epi16(raw1, 4), low_nibbles);
        }
      }
      for (int r = 0; r < R; ++r) {
        const int8_t* x = codes + r * in + b * Block;
        const __m256 sd = _mm256_mul_ps(scale, _mm256_set1_ps(activation_scales[r * blocks + b]));
        __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
        __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
        __m256i x1 = kTwoSpans ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 64))
                               : _mm256_setzero_si256();
        __m256i x3 = kTwoSpans ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 96))
                               : _mm256_setzero_si256();
        __m256i start_low = float_bias_bits, start_high = float_bias_bits;
        if constexpr (Bits == 8 && kVnni) {  // as the AVX-512 kernel: q + 128, less 128 times a
          const __m256i zero = _mm256_setzero_si256();
          start_low = _mm256_sub_epi32(
              start_low, AddProducts<kVnni>(AddProducts<kVnni>(zero, sign_bits, x0), sign_bits, x1));
          start_high = _mm256_sub_epi32(
              start_high, AddProducts<kVnni>(AddProducts<kVnni>(zero, sign_bits, x2), sign_bits, x3));
        } else if constexpr (Bits == 8) {  // |q| · (a with q's sign) = q · a
          x0 = _mm256_sign_epi8(x0, signs[0]);
          x2 = _mm256_sign_epi8(x2, signs[1]);
          x1 = _mm256_sign_epi8(x1, signs[2]);
          x3 = _mm256_sign_epi8(x3, signs[3]);
        }
        if constexpr (kVnni) {
          __m256i dot_low = AddProducts<kVnni>(start_low, w0_low, x0);
          __m256i dot_high = AddProducts<kVnni>(start_high, w0_high, x2);
          if constexpr (kTwoSpans) {
            dot_low = AddProducts<kVnni>(dot_low, w1_low, x1);
            dot_high = AddProducts<kVnni>(dot_high, w1_high, x3);
          }
          low[r] = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_castsi256_ps(dot_low), float_bias), sd, low[r]);
          high[r] = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_castsi256_ps(dot_high), float_bias), sd, high[r]);
        } else {
          low[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotAvx2<Bits, kTwoSpans>(w0_low, x0, w1_low, x1)),
                                   sd, low[r]);
          high[r] = _mm256_fmadd_ps(
              _mm256_cvtepi32_ps(DotAvx2<Bits, kTwoSpans>(w0_high, x2, w1_high, x3)), sd, high[r]);
        }
      }
    }
  }
  EndRow<R>(op, row, low, high, r0, n);
}

// Output n of rows r0..r0+R-1 for weights in groups of 32: TileVnni32<R, 1>'s operations, lane
// for lane (each half's lanes 0-3 are the span's first group, 4-7 its second).
template <bool kVnni, int R>
__attribute__((target("avx2,fma"))) void Row256Groups32(const QuantOperands& op,
                                                              const Int8Activations& xa,
                                                              int64_t r0, int64_t n) {
  const int64_t in = op.in, groups = op.groups;
  __m256 low[R], high[R];
  for (int r = 0; r < R; ++r) low[r] = high[r] = _mm256_setzero_ps();
  const uint8_t* row = op.w + n * groups * op.block_bytes;
  const uint8_t* next = op.w + StreamRow(op, n) * groups * op.block_bytes;
  const int8_t* codes = xa.codes.data() + r0 * in;
  const float* activation_scales = xa.scales.data() + r0 * groups;
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i float_bias_bits = _mm256_set1_epi32(0x4B400000);
  const __m256 float_bias = _mm256_castsi256_ps(float_bias_bits);
  constexpr int kSecondGroup = 0xF0;
  for (int64_t span = 0; span < in / 64; ++span) {
    const int64_t g = 2 * span;
    const uint8_t* first = row + g * op.block_bytes;
    const uint8_t* second = first + op.block_bytes;
    _mm_prefetch(reinterpret_cast<const char*>(next + g * op.block_bytes), _MM_HINT_T0);
    const __m256 scale =
        _mm256_blend_ps(_mm256_set1_ps(BlockScale(first)), _mm256_set1_ps(BlockScale(second)), kSecondGroup);
    const __m256i raw = _mm256_inserti128_si256(
        _mm256_castsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + kPackedBlockHeaderBytes))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(second + kPackedBlockHeaderBytes)), 1);
    const __m256i w_low = _mm256_and_si256(raw, low_nibbles);
    const __m256i w_high = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles);
    for (int r = 0; r < R; ++r) {
      const int8_t* x = codes + r * in + span * 64;
      const __m256 sd = _mm256_mul_ps(
          scale, _mm256_blend_ps(_mm256_set1_ps(activation_scales[r * groups + g]),
                                 _mm256_set1_ps(activation_scales[r * groups + g + 1]), kSecondGroup));
      const __m256i x_low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
      const __m256i x_high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
      if constexpr (kVnni) {
        const __m256i dot_low = AddProducts<kVnni>(float_bias_bits, w_low, x_low);
        const __m256i dot_high = AddProducts<kVnni>(float_bias_bits, w_high, x_high);
        low[r] = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_castsi256_ps(dot_low), float_bias), sd, low[r]);
        high[r] = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_castsi256_ps(dot_high), float_bias), sd, high[r]);
      } else {
        low[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotAvx2<4, false>(w_low, x_low, w_low, x_low)),
                                 sd, low[r]);
        high[r] = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(DotAvx2<4, false>(w_high, x_high, w_high, x_high)), sd, high[r]);
      }
    }
  }
  EndRow<R>(op, row, low, high, r0, n);
}

template <bool kVnni, int R>
void Chunk256(const QuantOperands& op, const Int8Activations& xa, int64_t r0, int64_t n0,
                  int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    if (op.bits == 8) {
      Row256<kVnni, R, 8>(op, xa, r0, n);
    } else if (op.group_size == 32) {
      Row256Groups32<kVnni, R>(op, xa, r0, n);
    } else if (op.group_size == 64) {
      Row256<kVnni, R, 4, 64>(op, xa, r0, n);
    } else {
      Row256<kVnni, R, 4>(op, xa, r0, n);
    }
  }
}

}  // namespace

__attribute__((target("avx2,fma"))) void QuantizeActivationsAvx2(const QuantOperands& op,
                                                                int64_t block,
                                                                Int8Activations* out) {
  const float* x = op.x;
  const int64_t rows = op.rows, in = op.in;
  const __m256 sign_bits = _mm256_set1_ps(-0.0f);
  const __m256i most = _mm256_set1_epi32(127), least = _mm256_set1_epi32(-127);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / block; ++b) {
      const float* xb = x + r * in + b * block;
      __m256 max_abs = _mm256_setzero_ps();
      for (int64_t c = 0; c < block; c += 8) {
        max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bits, _mm256_loadu_ps(xb + c)));
      }
      float lanes[8];
      _mm256_storeu_ps(lanes, max_abs);
      const float largest = *std::max_element(lanes, lanes + 8);  // a maximum: any order
      out->scales[static_cast<size_t>(r * (in / block) + b)] = largest / 127.0f;
      const __m256 inverse = _mm256_set1_ps(largest > 0 ? 127.0f / largest : 0.0f);
      int8_t* codes = out->codes.data() + r * in;
      for (int64_t c = 0; c < block; c += 8) {
        // Round to nearest even, never past +-127: the AVX-512 quantizer's codes.
        __m256i code = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + c), inverse));
        code = _mm256_max_epi32(_mm256_min_epi32(code, most), least);
        alignas(32) int32_t values[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(values), code);
        const int64_t i = b * block + c;  // 8 inputs inside one span's run of 16
        int8_t* to = codes + VnniCodePosition(op.bits, i);
        for (int i = 0; i < 8; ++i) to[i] = static_cast<int8_t>(values[i]);
      }
    }
  }
}

namespace {

template <bool kVnni>
void Rows256(const QuantOperands& op, const Int8Activations& codes, int64_t n0, int64_t n1) {
  for (int64_t r = 0; r < op.rows; r += 4) {
    switch (std::min<int64_t>(4, op.rows - r)) {
      case 1: Chunk256<kVnni, 1>(op, codes, r, n0, n1); break;
      case 2: Chunk256<kVnni, 2>(op, codes, r, n0, n1); break;
      case 3: Chunk256<kVnni, 3>(op, codes, r, n0, n1); break;
      default: Chunk256<kVnni, 4>(op, codes, r, n0, n1); break;
    }
  }
}

}  // namespace

void QuantizedRowsAvxVnni(const QuantOperands& op, const Int8Activations& codes, int64_t n0,
                          int64_t n1) {
  Rows256<true>(op, codes, n0, n1);
}

void QuantizedRowsAvx2Int8(const QuantOperands& op, const Int8Activations& codes, int64_t n0,
                           int64_t n1) {
  Rows256<false>(op, codes, n0, n1);
}

}  // namespace placer::model
