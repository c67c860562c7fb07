// 4- and 8-bit weights x int8 activations with vpdpbusd (quantized_vnni.h says what it
// computes).
//
// Unpacking: 64 inputs of a group are 32 payload bytes, byte j of each 16 holding input j in
// its low nibble and input j + 16 in its high one (loader/quantized_layout.h). Broadcast to
// both halves of a 512-bit register and shifted right by 0 (low half) or 4 (high half), then
// masked to 0x0F, they give 64 codes ordered as inputs 0-15, 32-47, 16-31, 48-63: two
// instructions and one load per 64 weights, shared by every input row of the tile. The
// activations are stored in that order (QuantizeActivations), so each int32 lane of vpdpbusd
// sums four products of the same inputs on both sides.
#include "model/quantized_vnni.h"
#include "model/packed_block_header.h"
#include "model/vnni_span.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/keep_in_register.h"
#include "model/row_passes.h"
#include "model/vector_sum.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kBlock = 128;      // activation block (within one weight group; 64 for 4-bit groups of 64)
constexpr int64_t kTilesAhead = 4;   // weight rows prefetched this many tiles ahead

inline float OffsetAt(const QuantOperands& op, const uint8_t* row, int64_t g) {
  return BlockOffset(row + g * op.block_bytes);
}

// The end of a tile of 2 weight rows x 8 input rows (vector_sum.h) with the offsets' share
// summed as one vector of its 16 outputs (lane t · 8 + r), group by group in order: the
// arithmetic of the scalar end of TileVnni for each output, so the same bits.
__attribute__((target("avx512f,avx512dq,fma"), always_inline)) inline void EndTwoByEight(
    const QuantOperands& op, const Int8Activations& xa, const uint8_t* const (&row)[2],
    const __m512 (&acc)[2][8], int64_t r0, int64_t n) {
  __m512 offsets = _mm512_setzero_ps();
  for (int64_t g = 0; g < op.groups; ++g) {
    const __m512 offset = _mm512_insertf32x8(_mm512_set1_ps(OffsetAt(op, row[0], g)),
                                             _mm256_set1_ps(OffsetAt(op, row[1], g)), 1);
    const __m512 group_sums = _mm512_broadcast_f32x8(
        _mm256_loadu_ps(xa.group_sums_by_group.data() + g * op.rows + r0));
    offsets = _mm512_fmadd_ps(offset, group_sums, offsets);
  }
  const float bias0 = op.bias != nullptr ? op.bias[n] : 0.0f;
  const float bias1 = op.bias != nullptr ? op.bias[n + 1] : 0.0f;
  StoreTwoByEight(acc, offsets, bias0, bias1, op.y + r0 * op.out + n, op.out);
}

// The offsets' share of a tile's outputs: per output and row, fma(m, group sum, share) group by
// group in order. Decode's tiles of one or two outputs sum it beside the vector sums, one group
// per step of the tile's group loop (Add): left to the end of the tile, each output's chain of
// dependent fmas (4 cycles apiece, 16 groups at the ~1.1B model's 2048 inputs) ran after its
// row's arithmetic instead of under it, and one-row decode tiles took 20-40 % longer in cache.
// Larger tiles sum it at their end (EndTile), where its R x T partial sums take no registers
// from the vector sums (the 8 x 2 prompt tile as one vector, EndTwoByEight): the same bits.
template <int R, int T>
struct TileOffsets {
  static constexpr bool kInLoop = R * T <= 2;
  float share[T][R] = {};

  __attribute__((always_inline)) inline void Add(const QuantOperands& op,
                                                 const uint8_t* const (&row)[T], int64_t r0,
                                                 int64_t g) {
    if constexpr (kInLoop) {
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        const float offset = OffsetAt(op, row[t], g);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          share[t][r] = __builtin_fmaf(offset, op.x_group_sums[(r0 + r) * op.groups + g], share[t][r]);
        }
      }
    }
  }
};

// A tile's outputs from its 16-lane sums: the fixed lane sum, plus the offsets' share (group by
// group in order) and the bias; the 8 x 2 tile as one vector with the same bits.
template <int R, int T>
__attribute__((target("avx512f,avx512dq,fma"), always_inline)) inline void EndTile(
    const QuantOperands& op, const Int8Activations& xa, const uint8_t* const (&row)[T],
    const __m512 (&acc)[T][R], const TileOffsets<R, T>& in_loop, int64_t r0, int64_t n) {
  if constexpr (R == 8 && T == 2) {
    EndTwoByEight(op, xa, row, acc, r0, n);
    return;
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      float offsets = 0;
      if constexpr (TileOffsets<R, T>::kInLoop) {
        offsets = in_loop.share[t][r];
      } else {
        const float* group_sums = op.x_group_sums + (r0 + r) * op.groups;
        for (int64_t g = 0; g < op.groups; ++g) {
          offsets = __builtin_fmaf(OffsetAt(op, row[t], g), group_sums[g], offsets);
        }
      }
      op.y[(r0 + r) * op.out + n + t] = _mm512_reduce_add_ps(acc[t][r]) + offsets + bias;
    }
  }
}

// Outputs n..n+T-1 of input rows r0..r0+R-1. Per output and row: one 16-lane float sum over
// the blocks in order, fma(float(block dot), s · d, sum), then the fixed lane sum, plus the
// offsets' share (group by group) and the bias: the same operations whatever R and T, so the
// tile shape never changes a bit. Bits 8: a block's 128 codes are its 128 payload bytes, in
// input order (the activations too), loaded as they are. Block: the activation block, 128
// inputs (two 64-input spans) or, for 4-bit groups of 64, one span.
template <int R, int T, int Bits, int Block = kBlock, int BlocksPerGroup = 0>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni,fma"), always_inline)) inline void TileVnni(
    const QuantOperands& op, const Int8Activations& xa, int64_t r0, int64_t n) {
  const int64_t in = op.in, groups = op.groups;
  static_assert(Block == kBlock || (Block == 64 && Bits == 4), "one or two spans of 4-bit codes");
  constexpr bool kTwoSpans = Block == 128;
  // BlocksPerGroup: known when the tile is compiled (1 for 4-bit groups of 128, the common
  // case: no inner loop), else 0, from the layout.
  const int64_t blocks_per_group = BlocksPerGroup > 0 ? BlocksPerGroup : op.group_size / Block;
  const int64_t blocks = in / Block;
  __m512 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  const int64_t row_bytes = groups * op.block_bytes;
  const uint8_t* row[T];
  const uint8_t* ahead[T];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    row[t] = op.w + (n + t) * row_bytes;
    const int64_t ahead_row = n + t + kTilesAhead * T;
    ahead[t] = op.w + (ahead_row < op.out ? ahead_row : n + t) * row_bytes;
  }
  const int8_t* codes = xa.codes.data() + r0 * in;
  const float* activation_scales = xa.scales.data() + r0 * blocks;
  const __m512i sign_bits = _mm512_set1_epi8(static_cast<char>(0x80));  // also the byte 128
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  const __m512i float_bias_bits = _mm512_set1_epi32(0x4B400000);
  const __m512 float_bias = _mm512_castsi512_ps(float_bias_bits);
  TileOffsets<R, T> offsets;
  for (int64_t g = 0; g < groups; ++g) {
    offsets.Add(op, row, r0, g);
    __m512 scale[T];
    const uint8_t* p[T];
    const uint8_t* pa[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const uint8_t* block = row[t] + g * op.block_bytes;
      scale[t] = _mm512_set1_ps(BlockScale(block));
      KeepInRegister(scale[t]);
      p[t] = block + kPackedBlockHeaderBytes;
      pa[t] = ahead[t] + g * op.block_bytes + kPackedBlockHeaderBytes;
    }
    for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
      const int64_t b = g * blocks_per_group + bb;
      __m512i w0[T], w1[T];
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        if constexpr (Bits == 8) {
          const uint8_t* bytes = p[t] + bb * kBlock;
          _mm_prefetch(reinterpret_cast<const char*>(pa[t] + bb * kBlock), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(pa[t] + bb * kBlock + 64), _MM_HINT_T0);
          // Signed codes: vpdpbusd's unsigned operand is q + 128 (the sign bit flipped).
          w0[t] = _mm512_xor_si512(_mm512_loadu_si512(bytes), sign_bits);
          w1[t] = _mm512_xor_si512(_mm512_loadu_si512(bytes + 64), sign_bits);
          continue;
        }
        const uint8_t* bytes = p[t] + bb * (Block / 2);
        _mm_prefetch(reinterpret_cast<const char*>(pa[t] + bb * (Block / 2)), _MM_HINT_T0);
        w0[t] = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(bytes))),
                              shifts),
            low_nibbles);
        if constexpr (!kTwoSpans) continue;
        w1[t] = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(bytes + 32))),
                              shifts),
            low_nibbles);
      }
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        const int8_t* x = codes + r * in + b * Block;
        __m512i x0 = _mm512_loadu_si512(x);
        __m512i x1 = kTwoSpans ? _mm512_loadu_si512(x + 64) : _mm512_setzero_si512();
        KeepInRegister(x0);  // loaded once for the tile's T weight rows (keep_in_register.h)
        if constexpr (kTwoSpans) KeepInRegister(x1);
        // s · d as one vector product per weight row: the same float as the scalar product,
        // one instruction instead of a product and a broadcast (opaque, so GCC keeps it so).
        __m512 d = _mm512_set1_ps(activation_scales[r * blocks + b]);
        KeepInRegister(d);
        // 8-bit codes multiply as q + 128: each lane starts 128 times its activations lower,
        // so it ends at the signed dot product, exactly (once per row, whatever T).
        __m512i start = float_bias_bits;
        if constexpr (Bits == 8) {
          start = _mm512_sub_epi32(
              start, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), sign_bits, x0),
                                         sign_bits, x1));
        }
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          // The block's dot product (|dot| <= 128 · 15 · 127 for 4-bit codes, 128 · 128 · 127
          // for 8-bit ones: < 2^22) added to the bits of 2^23 + 2^22 reads as the float
          // 2^23 + 2^22 + dot: one exact subtraction gives float(dot) without vcvtdq2ps, which
          // would share the VNNI port.
          __m512i dot = _mm512_dpbusd_epi32(start, w0[t], x0);
          if constexpr (kTwoSpans) dot = _mm512_dpbusd_epi32(dot, w1[t], x1);
          const __m512 dot_float = _mm512_sub_ps(_mm512_castsi512_ps(dot), float_bias);
          acc[t][r] = _mm512_fmadd_ps(dot_float, _mm512_mul_ps(scale[t], d), acc[t][r]);
        }
      }
    }
  }
  EndTile<R, T>(op, xa, row, acc, offsets, r0, n);
}

// Outputs n..n+T-1 of input rows r0..r0+R-1 for weights in groups of 32, activations in blocks
// of 32: a 64-input span is two groups, whose two 16-byte payloads side by side are laid out as
// one span of a larger group; the unpacked order puts the first group's inputs in lanes 0-3 and
// 8-11, the second's in 4-7 and 12-15. One vpdpbusd per span and row, each lane scaled by its
// own group's s · d.
template <int R, int T>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni,fma"), always_inline)) inline void TileVnni32(
    const QuantOperands& op, const Int8Activations& xa, int64_t r0, int64_t n) {
  const int64_t in = op.in, groups = op.groups;
  __m512 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  const int64_t row_bytes = groups * op.block_bytes;
  const uint8_t* row[T];
  const uint8_t* ahead[T];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    row[t] = op.w + (n + t) * row_bytes;
    const int64_t ahead_row = n + t + kTilesAhead * T;
    ahead[t] = op.w + (ahead_row < op.out ? ahead_row : n + t) * row_bytes;
  }
  const int8_t* codes = xa.codes.data() + r0 * in;
  const float* activation_scales = xa.scales.data() + r0 * groups;  // one per group of 32
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  const __m512i float_bias_bits = _mm512_set1_epi32(0x4B400000);
  const __m512 float_bias = _mm512_castsi512_ps(float_bias_bits);
  constexpr __mmask16 kSecondGroup = 0xF0F0;
  TileOffsets<R, T> offsets;
  for (int64_t span = 0; span < in / 64; ++span) {
    const int64_t g = 2 * span;
    offsets.Add(op, row, r0, g);
    offsets.Add(op, row, r0, g + 1);
    __m512i w[T];
    __m512 scale[T];  // each lane its group's s
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const uint8_t* first = row[t] + g * op.block_bytes;
      const uint8_t* second = first + op.block_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(ahead[t] + g * op.block_bytes), _MM_HINT_T0);
      scale[t] = _mm512_mask_blend_ps(kSecondGroup, _mm512_set1_ps(BlockScale(first)),
                                      _mm512_set1_ps(BlockScale(second)));
      const __m256i payload = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(
              reinterpret_cast<const __m128i*>(first + kPackedBlockHeaderBytes))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(second + kPackedBlockHeaderBytes)), 1);
      w[t] = _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i64x4(payload), shifts),
                              low_nibbles);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      __m512i x = _mm512_loadu_si512(codes + r * in + span * 64);
      KeepInRegister(x);
      // Each lane its block's d: lane by lane the product s · d of the 128-input path.
      const __m512 d = _mm512_mask_blend_ps(kSecondGroup,
                                            _mm512_set1_ps(activation_scales[r * groups + g]),
                                            _mm512_set1_ps(activation_scales[r * groups + g + 1]));
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        const __m512i dot = _mm512_dpbusd_epi32(float_bias_bits, w[t], x);
        const __m512 dot_float = _mm512_sub_ps(_mm512_castsi512_ps(dot), float_bias);
        acc[t][r] = _mm512_fmadd_ps(dot_float, _mm512_mul_ps(scale[t], d), acc[t][r]);
      }
    }
  }
  EndTile<R, T>(op, xa, row, acc, offsets, r0, n);
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni,fma"))) void ChunkVnni(
    const QuantOperands& op, const Int8Activations& xa, int64_t r0, int64_t n0, int64_t n1) {
  // Weight rows per tile: one at one or two rows, so each thread's weights are one sequential
  // stream (on a Zen 4 EPYC, tiles of 4 rows took the ~1.1B int4a8 decode step 33-37 ms against
  // 24.4-24.9: bench/analysis.md, "One weight stream per thread"); two at more, the
  // accumulators (one per weight row and input row) and unpacked weights (two each) within the
  // registers (8 rows x 2: 16 accumulators, 4 weight and 2 activation vectors, 2 scales,
  // constants). An output's arithmetic is the same whatever the tile.
  constexpr int kT = R <= 2 ? 1 : 2;
  int64_t n = n0;
  if (op.group_size == 32) {
    for (; n + kT <= n1; n += kT) TileVnni32<R, kT>(op, xa, r0, n);
    for (; n < n1; ++n) TileVnni32<R, 1>(op, xa, r0, n);
    return;
  }
  if (op.bits == 8) {
    for (; n + kT <= n1; n += kT) TileVnni<R, kT, 8>(op, xa, r0, n);
    for (; n < n1; ++n) TileVnni<R, 1, 8>(op, xa, r0, n);
    return;
  }
  if (op.group_size == 64) {
    for (; n + kT <= n1; n += kT) TileVnni<R, kT, 4, 64>(op, xa, r0, n);
    for (; n < n1; ++n) TileVnni<R, 1, 4, 64>(op, xa, r0, n);
    return;
  }
  if (op.group_size == kBlock) {
    for (; n + kT <= n1; n += kT) TileVnni<R, kT, 4, kBlock, 1>(op, xa, r0, n);
    for (; n < n1; ++n) TileVnni<R, 1, 4, kBlock, 1>(op, xa, r0, n);
    return;
  }
  for (; n + kT <= n1; n += kT) TileVnni<R, kT, 4>(op, xa, r0, n);
  for (; n < n1; ++n) TileVnni<R, 1, 4>(op, xa, r0, n);
}

}  // namespace

std::vector<Int8ActivationIsa> RunnableInt8ActivationIsas() {
  static const std::vector<Int8ActivationIsa> runnable = [] {
    __builtin_cpu_init();
    std::vector<Int8ActivationIsa> isas;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni")) {
      isas.push_back(Int8ActivationIsa::kAvx512Vnni);
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("avxvnni")) {
      isas.push_back(Int8ActivationIsa::kAvxVnni);
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      isas.push_back(Int8ActivationIsa::kAvx2);
    }
    return isas;
  }();
  return runnable;
}

Int8ActivationIsa DetectInt8ActivationIsa() {
  const std::vector<Int8ActivationIsa>& runnable = RunnableInt8ActivationIsas();
  return runnable.empty() ? Int8ActivationIsa::kNone : runnable.front();
}

const char* Int8ActivationIsaName(Int8ActivationIsa isa) {
  switch (isa) {
    case Int8ActivationIsa::kAvx512Vnni: return "avx512_vnni";
    case Int8ActivationIsa::kAvxVnni: return "avx_vnni";
    case Int8ActivationIsa::kAvx2: return "avx2";
    case Int8ActivationIsa::kNone: break;
  }
  return "none";
}

bool Int8ActivationKernelRuns() { return DetectInt8ActivationIsa() != Int8ActivationIsa::kNone; }

bool Int8ActivationKernelApplies(const loader::PackedLayout& layout) {
  if (layout.bits == 8) return layout.group_size % kBlock == 0 && layout.in % kBlock == 0;
  if (layout.bits != 4) return false;
  if (layout.group_size == 32 || layout.group_size == 64) return layout.in % 64 == 0;
  return layout.group_size % kBlock == 0 && layout.in % kBlock == 0;
}

int64_t ActivationBlock(const loader::PackedLayout& layout) {
  if (layout.bits == 4 && (layout.group_size == 32 || layout.group_size == 64)) return layout.group_size;
  return kBlock;
}

namespace {

__attribute__((target("avx512f,avx512bw"))) void QuantizeActivationsAvx512(
    const QuantOperands& op, int64_t block, Int8Activations* out) {
  const float* x = op.x;
  const int64_t rows = op.rows, in = op.in;
  const __m512i most = _mm512_set1_epi32(127), least = _mm512_set1_epi32(-127);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / block; ++b) {
      const float* xb = x + r * in + b * block;
      __m512 max_abs = _mm512_setzero_ps();
      for (int64_t c = 0; c < block; c += 16) {
        max_abs = _mm512_max_ps(max_abs, _mm512_abs_ps(_mm512_loadu_ps(xb + c)));
      }
      const float largest = _mm512_reduce_max_ps(max_abs);
      out->scales[static_cast<size_t>(r * (in / block) + b)] = largest / 127.0f;
      const __m512 inverse = _mm512_set1_ps(largest > 0 ? 127.0f / largest : 0.0f);
      int8_t* codes = out->codes.data() + r * in;
      for (int64_t c = 0; c < block; c += 16) {
        // Round to nearest even (the default rounding mode), never past +-127.
        __m512i code = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + c), inverse));
        code = _mm512_max_epi32(_mm512_min_epi32(code, most), least);
        const int64_t i = b * block + c;  // 16 inputs inside one span's run of 16
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + VnniCodePosition(op.bits, i)),
                         _mm512_cvtepi32_epi8(code));
      }
    }
  }
}

}  // namespace

void QuantizeActivations(const QuantOperands& op, int64_t block, Int8Activations* out,
                         Int8ActivationIsa isa) {
  const int64_t rows = op.rows;
  out->group_sums_by_group.resize(static_cast<size_t>(op.groups * rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < op.groups; ++g) {
      out->group_sums_by_group[static_cast<size_t>(g * rows + r)] = op.x_group_sums[r * op.groups + g];
    }
  }
  out->block = block;
  out->codes.resize(static_cast<size_t>(rows * op.in));
  out->scales.resize(static_cast<size_t>(rows * (op.in / block)));
  if (isa == Int8ActivationIsa::kAvxVnni || isa == Int8ActivationIsa::kAvx2) {
    QuantizeActivationsAvx2(op, block, out);
  } else {
    QuantizeActivationsAvx512(op, block, out);
  }
}

void QuantizedRowsInt8Activations(const QuantOperands& op, const Int8Activations& codes,
                                  int64_t n0, int64_t n1, Int8ActivationIsa isa) {
  if (isa == Int8ActivationIsa::kAvxVnni) {
    QuantizedRowsAvxVnni(op, codes, n0, n1);
    return;
  }
  if (isa == Int8ActivationIsa::kAvx2) {
    QuantizedRowsAvx2Int8(op, codes, n0, n1);
    return;
  }
  // Prompt chunks in tiles of 8 rows (`placer-bench-model quantized-products`, the small
  // preset's layers at 64 rows, 2 threads: 42 ms in tiles of 4 rows, 34 in tiles of 8 before
  // their 16 outputs were summed as one vector, 20 after, with the conversions off the VNNI
  // port and the activations quantized by vectors), then tails of up to 4.
  int64_t r0 = 0;
  for (; r0 + 8 <= op.rows; r0 += 8) ChunkVnni<8>(op, codes, r0, n0, n1);
  InPassesOfUpTo<4>(
      op.rows,
      [&](auto rows, int64_t r) { ChunkVnni<decltype(rows)::value>(op, codes, r, n0, n1); }, r0);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
