// The few-row kernels over packed weights (quantized_linear.h says what they promise). A block
// of group_size codes q with scale s and offset m contributes
//   sum_c fma(q_c, s, m) x_c  =  s · (sum_c q_c x_c)  +  m · (sum_c x_c),
// so the codes are only converted to float32 and multiplied with the inputs; the scale is
// applied once per block and the offset once per block through the group sums of the inputs,
// which QuantizedLinearKernel computes once per call. That leaves one conversion per weight,
// shared by every input row of the chunk (the weight is read once per chunk of rows), and one
// fma per weight and row.
//
// Every output of every row is computed in one fixed order, whatever the rows or tile it comes
// in: per block, two vector partial dots (inputs alternating between them by 16 (AVX-512) or 8
// (AVX2)), a scalar dot of the codes past the last full vector (int8 groups only), then
//   acc = fma(d0 + d1, s, acc),  scalar = fma(tail, s, scalar),  scalar = fma(m, X_g, scalar);
// y = lane sum of acc (fixed order) + scalar + bias. Two partial dots per block keep two fma
// chains per output in flight; the tiles pick how many weight rows share each input row.
// 4-bit weights with AVX-512 skip the factoring: each block's 16 possible weights fma(q, s, m)
// sit in a register, a code picks its weight with one permute (vpermps reads the low 4 bits),
// and per block  acc = acc + (d0 + d1)  over the dequantized weights' products, no scalar part:
// a permute per 16 weights instead of a mask or shift and a conversion, and nothing per block
// but the table (small preset int4 decode step 2.7 -> 2.4 ms, ~1.1B 46 -> 41 ms in process).
// 4-bit groups of multiples of 128 inputs take quantized_int4_quads.h instead on AVX-512.
#include "model/quantized_kernels.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loader/quantized_layout.h"
#include "model/keep_in_register.h"
#include "model/vector_sum.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

struct BlockHeader {
  float scale, offset;
};

inline BlockHeader HeaderAt(const uint8_t* block) {
  BlockHeader header;
  std::memcpy(&header.scale, block, sizeof(float));
  std::memcpy(&header.offset, block + sizeof(float), sizeof(float));
  return header;
}

// The codes of an 8-bit group past its last full vector, times the inputs, summed in order.
inline float ScalarTailDot8(const uint8_t* codes, const float* x, int64_t c, int64_t gs) {
  float sum = 0;
  for (; c < gs; ++c) sum = __builtin_fmaf(static_cast<float>(static_cast<int8_t>(codes[c])), x[c], sum);
  return sum;
}

// The weight row whose bytes a tile starting at `row` prefetches: kTilesAhead tiles of T rows
// further on and at least kStreamPrefetchBytes (stream_prefetch.h: 4 rows of the small preset's
// 4-bit weights were 1.6 KiB, where a float stream gained nothing), or its own row near the end
// (a prefetch never faults, but the pointer must stay inside the weight).
constexpr int64_t kTilesAhead = 4;

inline int64_t AheadRow(const QuantOperands& op, int64_t row, int tile_rows) {
  const int64_t rows_ahead = std::max<int64_t>(kTilesAhead * tile_rows, op.stream_rows_ahead);
  const int64_t ahead = row + rows_ahead;
  return ahead < op.out ? ahead : row;
}

// ---- AVX-512: T weight rows x R input rows per tile, 16 lanes.

// The sums of a tile before its lanes are added: y[r][n + t] = (lane sum of acc[t][r]) +
// scalar[t][r] + bias, added by Tile512 or, sixteen outputs at once, by SixteenOutputs.
template <int R, int T>
__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void Accumulate512(
    const QuantOperands& op, const float* x, const float* x_sums, int64_t n, __m512 (&acc)[T][R],
    float (&scalar)[T][R]) {
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      acc[t][r] = _mm512_setzero_ps();
      scalar[t][r] = 0;
    }
  }
  const int64_t in = op.in, gs = op.group_size, groups = op.groups;
  const uint8_t* row[T];
  const uint8_t* ahead[T];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    row[t] = op.w + (n + t) * groups * op.block_bytes;
    ahead[t] = op.w + AheadRow(op, n + t, T) * groups * op.block_bytes;
  }
  const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* p[T];
    const uint8_t* pa[T];
    __m512 d0[T][R], d1[T][R];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      p[t] = row[t] + g * op.block_bytes + kPackedBlockHeaderBytes;
      pa[t] = ahead[t] + g * op.block_bytes + kPackedBlockHeaderBytes;
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        d0[t][r] = _mm512_setzero_ps();
        d1[t][r] = _mm512_setzero_ps();
      }
    }
    const float* xg = x + g * gs;
    int64_t c = 0;
    if (op.bits == 4) {
      // The group's 16 possible weights, fma(q, s, m) as the loader dequantizes them: a code
      // picks its weight with one permute (the code's low 4 bits index the table), so a
      // nibble costs a permute instead of a mask or shift plus a conversion, and the block
      // needs no scale or offset afterwards.
      __m512 table[T];
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        const BlockHeader h = HeaderAt(p[t] - kPackedBlockHeaderBytes);
        table[t] = _mm512_fmadd_ps(codes, _mm512_set1_ps(h.scale), _mm512_set1_ps(h.offset));
      }
      for (; c < gs; c += 32) {
        __m512 lo[T], hi[T];
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          _mm_prefetch(reinterpret_cast<const char*>(pa[t] + c / 2), _MM_HINT_T0);
          const __m512i bytes = _mm512_cvtepu8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[t] + c / 2)));
          lo[t] = _mm512_permutexvar_ps(bytes, table[t]);
          hi[t] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table[t]);
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          __m512 x_lo = _mm512_loadu_ps(xg + r * in + c);
          __m512 x_hi = _mm512_loadu_ps(xg + r * in + c + 16);
          KeepInRegister(x_lo);  // loaded once for the tile's T weight rows (keep_in_register.h)
          KeepInRegister(x_hi);
          _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
            d0[t][r] = _mm512_fmadd_ps(lo[t], x_lo, d0[t][r]);
            d1[t][r] = _mm512_fmadd_ps(hi[t], x_hi, d1[t][r]);
          }
        }
      }
      // The dequantized weights' products, summed per lane across groups (acc below).
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          acc[t][r] = _mm512_add_ps(acc[t][r], _mm512_add_ps(d0[t][r], d1[t][r]));
        }
      }
      continue;
    } else {
      for (; c + 32 <= gs; c += 32) {
        __m512 w0[T], w1[T];
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          _mm_prefetch(reinterpret_cast<const char*>(pa[t] + c), _MM_HINT_T0);
          w0[t] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[t] + c))));
          w1[t] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[t] + c + 16))));
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          __m512 x0 = _mm512_loadu_ps(xg + r * in + c);
          __m512 x1 = _mm512_loadu_ps(xg + r * in + c + 16);
          KeepInRegister(x0);  // loaded once for the tile's T weight rows (keep_in_register.h)
          KeepInRegister(x1);
          _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
            d0[t][r] = _mm512_fmadd_ps(w0[t], x0, d0[t][r]);
            d1[t][r] = _mm512_fmadd_ps(w1[t], x1, d1[t][r]);
          }
        }
      }
      if (c + 16 <= gs) {
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          const __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[t] + c))));
          _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
            d0[t][r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xg + r * in + c), d0[t][r]);
          }
        }
        c += 16;
      }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const BlockHeader h = HeaderAt(p[t] - kPackedBlockHeaderBytes);
      const __m512 s = _mm512_set1_ps(h.scale);
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        acc[t][r] = _mm512_fmadd_ps(_mm512_add_ps(d0[t][r], d1[t][r]), s, acc[t][r]);
        if (c < gs) {
          scalar[t][r] = __builtin_fmaf(ScalarTailDot8(p[t], xg + r * in, c, gs), h.scale,
                                        scalar[t][r]);
        }
        scalar[t][r] = __builtin_fmaf(h.offset, x_sums[r * groups + g], scalar[t][r]);
      }
    }
  }
}

template <int R, int T>
__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void Tile512(
    const QuantOperands& op, const float* x, const float* x_sums, int64_t n, float* y) {
  __m512 acc[T][R];
  float scalar[T][R];
  Accumulate512<R, T>(op, x, x_sums, n, acc, scalar);
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      y[r * op.out + n + t] = _mm512_reduce_add_ps(acc[t][r]) + scalar[t][r] + bias;
    }
  }
}

// Outputs [n, n + 16) of one input row: their lanes summed together (HorizontalSums512x16, the
// intrinsic's order, so every bit as Tile512 gives them). At one row a ~768-input product is
// ~24 multiply-add steps per output, and the 12 dependent instructions of each output's own
// lane sum held ~17 % of the kernel's samples (perf annotate, small preset int4 decode).
__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void SixteenOutputs(
    const QuantOperands& op, const float* x, const float* x_sums, int64_t n, float* y) {
  __m512 acc[16];
  alignas(64) float scalar[16];
  _Pragma("GCC unroll 1") for (int i = 0; i < 16; ++i) {
    __m512 one[1][1];
    float one_scalar[1][1];
    Accumulate512<1, 1>(op, x, x_sums, n + i, one, one_scalar);
    acc[i] = one[0][0];
    scalar[i] = one_scalar[0][0];
  }
  // Tile512 adds 0 where there is no bias (-0 + 0 is +0), so this does too.
  const __m512 bias = op.bias != nullptr ? _mm512_loadu_ps(op.bias + n) : _mm512_setzero_ps();
  const __m512 sums = _mm512_add_ps(HorizontalSums512x16(acc), _mm512_load_ps(scalar));
  _mm512_storeu_ps(y + n, _mm512_add_ps(sums, bias));
}

// Weight rows per tile for R input rows: one at one or two rows, so each thread's weights are
// one sequential stream (on a Zen 4 EPYC, tiles of 4 rows took the small preset's int8 decode
// step 5.4-5.7 ms against 3.2-3.4: bench/analysis.md, "One weight stream per thread"); two at
// 3-4 rows; the accumulators (3 vectors per weight row and input row) within the 32 registers
// at more. An output's arithmetic is the same whatever the tile.
template <int R>
constexpr int WeightRowsPerTile512() {
  return R <= 2 ? 1 : R <= 4 ? 2 : 1;
}

template <int R>
__attribute__((target("avx512f,avx512bw,fma"))) void Chunk512(const QuantOperands& op, int64_t r0,
                                                             int64_t n0, int64_t n1) {
  constexpr int kT = WeightRowsPerTile512<R>();
  const float* x = op.x + r0 * op.in;
  const float* x_sums = op.x_group_sums + r0 * op.groups;
  float* y = op.y + r0 * op.out;
  int64_t n = n0;
  if constexpr (R == 1) {
    for (; n + 16 <= n1; n += 16) SixteenOutputs(op, x, x_sums, n, y);
  }
  for (; n + kT <= n1; n += kT) Tile512<R, kT>(op, x, x_sums, n, y);
  for (; n < n1; ++n) Tile512<R, 1>(op, x, x_sums, n, y);
}

// ---- AVX2: T weight rows x R input rows per tile, 8 lanes (16 vector registers).

template <int R, int T>
__attribute__((target("avx2,fma"), always_inline)) inline void Tile256(const QuantOperands& op,
                                                                     const float* x,
                                                                     const float* x_sums,
                                                                     int64_t n, float* y) {
  __m256 acc[T][R];
  float scalar[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      acc[t][r] = _mm256_setzero_ps();
      scalar[t][r] = 0;
    }
  }
  const int64_t in = op.in, gs = op.group_size, groups = op.groups;
  const uint8_t* row[T];
  const uint8_t* ahead[T];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    row[t] = op.w + (n + t) * groups * op.block_bytes;
    ahead[t] = op.w + AheadRow(op, n + t, T) * groups * op.block_bytes;
  }
  const __m256i nibble = _mm256_set1_epi32(0xF);
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* p[T];
    const uint8_t* pa[T];
    __m256 d0[T][R], d1[T][R];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      p[t] = row[t] + g * op.block_bytes + kPackedBlockHeaderBytes;
      pa[t] = ahead[t] + g * op.block_bytes + kPackedBlockHeaderBytes;
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        d0[t][r] = _mm256_setzero_ps();
        d1[t][r] = _mm256_setzero_ps();
      }
    }
    const float* xg = x + g * gs;
    int64_t c = 0;
    if (op.bits == 4) {
      for (; c < gs; c += 32) {
        // Bytes 0-7 hold inputs 0-7 (low nibbles) and 16-23 (high); bytes 8-15: 8-15, 24-31.
        // Inputs 0-7 and 16-23 go to d0, 8-15 and 24-31 to d1.
        __m256 w[T][4];
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          _mm_prefetch(reinterpret_cast<const char*>(pa[t] + c / 2), _MM_HINT_T0);
          _Pragma("GCC unroll 2") for (int half = 0; half < 2; ++half) {
            const __m256i bytes = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p[t] + c / 2 + 8 * half)));
            w[t][half] = _mm256_cvtepi32_ps(_mm256_and_si256(bytes, nibble));
            w[t][2 + half] = _mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4));
          }
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          const float* xr = xg + r * in + c;
          _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
            d0[t][r] = _mm256_fmadd_ps(w[t][0], _mm256_loadu_ps(xr), d0[t][r]);
            d1[t][r] = _mm256_fmadd_ps(w[t][1], _mm256_loadu_ps(xr + 8), d1[t][r]);
            d0[t][r] = _mm256_fmadd_ps(w[t][2], _mm256_loadu_ps(xr + 16), d0[t][r]);
            d1[t][r] = _mm256_fmadd_ps(w[t][3], _mm256_loadu_ps(xr + 24), d1[t][r]);
          }
        }
      }
    } else {
      for (; c + 16 <= gs; c += 16) {
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          _mm_prefetch(reinterpret_cast<const char*>(pa[t] + c), _MM_HINT_T0);
          const __m256 w0 = _mm256_cvtepi32_ps(
              _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p[t] + c))));
          const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p[t] + c + 8))));
          _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
            d0[t][r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xg + r * in + c), d0[t][r]);
            d1[t][r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xg + r * in + c + 8), d1[t][r]);
          }
        }
      }
      if (c + 8 <= gs) {
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          const __m256 w0 = _mm256_cvtepi32_ps(
              _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p[t] + c))));
          _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
            d0[t][r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xg + r * in + c), d0[t][r]);
          }
        }
        c += 8;
      }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const BlockHeader h = HeaderAt(p[t] - kPackedBlockHeaderBytes);
      const __m256 s = _mm256_set1_ps(h.scale);
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        acc[t][r] = _mm256_fmadd_ps(_mm256_add_ps(d0[t][r], d1[t][r]), s, acc[t][r]);
        if (c < gs) {
          scalar[t][r] = __builtin_fmaf(ScalarTailDot8(p[t], xg + r * in, c, gs), h.scale,
                                        scalar[t][r]);
        }
        scalar[t][r] = __builtin_fmaf(h.offset, x_sums[r * groups + g], scalar[t][r]);
      }
    }
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      y[r * op.out + n + t] = HorizontalSum256(acc[t][r]) + scalar[t][r] + bias;
    }
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void Chunk256(const QuantOperands& op, int64_t r0, int64_t n0,
                                                  int64_t n1) {
  constexpr int kT = R == 1 ? 2 : 1;
  const float* x = op.x + r0 * op.in;
  const float* x_sums = op.x_group_sums + r0 * op.groups;
  float* y = op.y + r0 * op.out;
  int64_t n = n0;
  for (; n + kT <= n1; n += kT) Tile256<R, kT>(op, x, x_sums, n, y);
  for (; n < n1; ++n) Tile256<R, 1>(op, x, x_sums, n, y);
}

}  // namespace

void QuantizedRowsAvx512(const QuantOperands& op, int64_t n0, int64_t n1) {
  for (int64_t r = 0; r < op.rows; r += 8) {
    switch (std::min<int64_t>(8, op.rows - r)) {
      case 1: Chunk512<1>(op, r, n0, n1); break;
      case 2: Chunk512<2>(op, r, n0, n1); break;
      case 3: Chunk512<3>(op, r, n0, n1); break;
      case 4: Chunk512<4>(op, r, n0, n1); break;
      case 5: Chunk512<5>(op, r, n0, n1); break;
      case 6: Chunk512<6>(op, r, n0, n1); break;
      case 7: Chunk512<7>(op, r, n0, n1); break;
      default: Chunk512<8>(op, r, n0, n1); break;
    }
  }
}

void QuantizedRowsAvx2(const QuantOperands& op, int64_t n0, int64_t n1) {
  for (int64_t r = 0; r < op.rows; r += 3) {
    switch (std::min<int64_t>(3, op.rows - r)) {
      case 1: Chunk256<1>(op, r, n0, n1); break;
      case 2: Chunk256<2>(op, r, n0, n1); break;
      default: Chunk256<3>(op, r, n0, n1); break;
    }
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
