// 4-bit weights x int8 activations with vpdpbusd (quantized_vnni.h says what it computes).
//
// Unpacking: 64 inputs of a group are 32 payload bytes, byte j of each 16 holding input j in
// its low nibble and input j + 16 in its high one (loader/quantized_layout.h). Broadcast to
// both halves of a 512-bit register and shifted right by 0 (low half) or 4 (high half), then
// masked to 0x0F, they give 64 codes ordered as inputs 0-15, 32-47, 16-31, 48-63: two
// instructions and one load per 64 weights, shared by every input row of the tile. The
// activations are stored in that order (QuantizeActivations), so each int32 lane of vpdpbusd
// sums four products of the same inputs on both sides.
#include "model/quantized_vnni.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/keep_in_register.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kBlock = 128;      // activation block (within one weight group)
constexpr int64_t kTilesAhead = 4;   // weight rows prefetched this many tiles ahead

inline float FloatAt(const uint8_t* p) {
  float value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

// Where input c (0-63) of a 64-input span sits in the kernel's order.
inline int64_t SpanPosition(int64_t c) {
  if (c < 16 || c >= 48) return c;
  return c < 32 ? c + 16 : c - 16;
}

template <int R, int T>
__attribute__((target("avx512f,avx512bw,avx512vnni,fma"), always_inline)) inline void TileVnni(
    const QuantOperands& op, const Int8Activations& xa, int64_t r0, int64_t n) {
  const int64_t in = op.in, groups = op.groups;
  const int64_t blocks_per_group = op.group_size / kBlock;
  const int64_t blocks = in / kBlock;
  __m512 acc[T][R];
  float scalar[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      acc[t][r] = _mm512_setzero_ps();
      scalar[t][r] = 0;
    }
  }
  const int64_t row_bytes = groups * op.block_bytes;
  const uint8_t* row[T];
  const uint8_t* ahead[T];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    row[t] = op.w + (n + t) * row_bytes;
    const int64_t ahead_row = n + t + kTilesAhead * T;
    ahead[t] = op.w + (ahead_row < op.out ? ahead_row : n + t) * row_bytes;
  }
  const __m512i shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  for (int64_t g = 0; g < groups; ++g) {
    float scale[T], offset[T];
    const uint8_t* p[T];
    const uint8_t* pa[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const uint8_t* block = row[t] + g * op.block_bytes;
      scale[t] = FloatAt(block);
      offset[t] = FloatAt(block + sizeof(float));
      p[t] = block + kPackedBlockHeaderBytes;
      pa[t] = ahead[t] + g * op.block_bytes + kPackedBlockHeaderBytes;
    }
    for (int64_t bb = 0; bb < blocks_per_group; ++bb) {
      const int64_t b = g * blocks_per_group + bb;
      __m512i w0[T], w1[T];
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        const uint8_t* bytes = p[t] + bb * (kBlock / 2);
        _mm_prefetch(reinterpret_cast<const char*>(pa[t] + bb * (kBlock / 2)), _MM_HINT_T0);
        w0[t] = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(bytes))),
                              shifts),
            low_nibbles);
        w1[t] = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(bytes + 32))),
                              shifts),
            low_nibbles);
      }
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        const int8_t* codes = xa.codes.data() + (r0 + r) * in + b * kBlock;
        __m512i x0 = _mm512_loadu_si512(codes);
        __m512i x1 = _mm512_loadu_si512(codes + 64);
        KeepInRegister(x0);  // loaded once for the tile's T weight rows (keep_in_register.h)
        KeepInRegister(x1);
        const float d = xa.scales[static_cast<size_t>((r0 + r) * blocks + b)];
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0[t], x0);
          dot = _mm512_dpbusd_epi32(dot, w1[t], x1);
          acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(scale[t] * d),
                                      acc[t][r]);
        }
      }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        scalar[t][r] = __builtin_fmaf(offset[t], op.x_group_sums[(r0 + r) * groups + g],
                                      scalar[t][r]);
      }
    }
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      op.y[(r0 + r) * op.out + n + t] = _mm512_reduce_add_ps(acc[t][r]) + scalar[t][r] + bias;
    }
  }
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni,fma"))) void ChunkVnni(
    const QuantOperands& op, const Int8Activations& xa, int64_t r0, int64_t n0, int64_t n1) {
  // Weight rows per tile: enough independent chains at one or two rows, the accumulators
  // (one per weight row and input row) and unpacked weights (two each) within the registers.
  constexpr int kT = R <= 2 ? 4 : 2;
  int64_t n = n0;
  for (; n + kT <= n1; n += kT) TileVnni<R, kT>(op, xa, r0, n);
  for (; n < n1; ++n) TileVnni<R, 1>(op, xa, r0, n);
}

}  // namespace

bool Int8ActivationKernelRuns() {
  static const bool runs = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return runs;
}

bool Int8ActivationKernelApplies(const loader::PackedLayout& layout) {
  return layout.bits == 4 && layout.group_size % kBlock == 0 && layout.in % kBlock == 0;
}

int64_t ActivationBlock(const loader::PackedLayout& /*layout*/) { return kBlock; }

void QuantizeActivations(const float* x, int64_t rows, int64_t in, int64_t block,
                         Int8Activations* out) {
  out->block = block;
  out->codes.assign(static_cast<size_t>(rows * in), 0);
  out->scales.assign(static_cast<size_t>(rows * (in / block)), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / block; ++b) {
      const float* xb = x + r * in + b * block;
      float max_abs = 0;
      for (int64_t c = 0; c < block; ++c) max_abs = std::max(max_abs, std::fabs(xb[c]));
      out->scales[static_cast<size_t>(r * (in / block) + b)] = max_abs / 127.0f;
      const float inverse = max_abs > 0 ? 127.0f / max_abs : 0.0f;
      int8_t* codes = out->codes.data() + r * in + b * block;
      for (int64_t c = 0; c < block; ++c) {
        // Round to nearest even (the default rounding mode), never past +-127.
        const long code = std::lrint(xb[c] * inverse);
        codes[(c / 64) * 64 + SpanPosition(c % 64)] =
            static_cast<int8_t>(std::clamp<long>(code, -127, 127));
      }
    }
  }
}

void QuantizedRowsInt8Activations(const QuantOperands& op, const Int8Activations& codes,
                                  int64_t n0, int64_t n1) {
  for (int64_t r = 0; r < op.rows; r += 4) {
    switch (std::min<int64_t>(4, op.rows - r)) {
      case 1: ChunkVnni<1>(op, codes, r, n0, n1); break;
      case 2: ChunkVnni<2>(op, codes, r, n0, n1); break;
      case 3: ChunkVnni<3>(op, codes, r, n0, n1); break;
      default: ChunkVnni<4>(op, codes, r, n0, n1); break;
    }
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
