// The few-row kernels over packed weights (quantized_linear.h says what they promise). Each
// block's codes are decoded in registers to float32 weights, fma(q, s, m), and multiplied
// with every input row of the chunk while there; the weight is read once per 8 (AVX-512) or
// 4 (AVX2) input rows.
#include "model/quantized_kernels.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loader/quantized_layout.h"
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

// The scalar part of an 8-bit group whose size is not a multiple of the lanes: its last codes,
// in order, into a float32 sum kept apart from the vector lanes (same order for every row).
inline float ScalarTail8(const uint8_t* payload, BlockHeader h, const float* x, int64_t c,
                         int64_t gs) {
  float sum = 0;
  for (; c < gs; ++c) {
    sum += __builtin_fmaf(static_cast<float>(static_cast<int8_t>(payload[c])), h.scale, h.offset) *
           x[c];
  }
  return sum;
}

// ---- AVX-512: T weight rows x R input rows per tile, 16 lanes.

template <int R, int T>
__attribute__((target("avx512f,avx512bw,fma"), always_inline)) inline void Tile512(
    const QuantOperands& op, const float* x, int64_t n, float* y) {
  __m512 acc[T][R];
  float tail[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      acc[t][r] = _mm512_setzero_ps();
      tail[t][r] = 0;
    }
  }
  const int64_t in = op.in, gs = op.group_size;
  const uint8_t* row[T];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    row[t] = op.w + (n + t) * op.groups * op.block_bytes;
  }
  const __m512i nibble = _mm512_set1_epi32(0xF);
  for (int64_t g = 0; g < op.groups; ++g) {
    __m512 s[T], m[T];
    const uint8_t* p[T];
    BlockHeader h[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const uint8_t* block = row[t] + g * op.block_bytes;
      h[t] = HeaderAt(block);
      s[t] = _mm512_set1_ps(h[t].scale);
      m[t] = _mm512_set1_ps(h[t].offset);
      p[t] = block + kPackedBlockHeaderBytes;
    }
    const float* xg = x + g * gs;
    if (op.bits == 4) {
      for (int64_t c = 0; c < gs; c += 32) {
        __m512 lo[T], hi[T];
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          const __m512i bytes = _mm512_cvtepu8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[t] + c / 2)));
          lo[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(bytes, nibble)), s[t], m[t]);
          hi[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(bytes, 4)), s[t], m[t]);
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          const __m512 x_lo = _mm512_loadu_ps(xg + r * in + c);
          const __m512 x_hi = _mm512_loadu_ps(xg + r * in + c + 16);
          _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
            acc[t][r] = _mm512_fmadd_ps(lo[t], x_lo, acc[t][r]);
            acc[t][r] = _mm512_fmadd_ps(hi[t], x_hi, acc[t][r]);
          }
        }
      }
    } else {
      int64_t c = 0;
      for (; c + 16 <= gs; c += 16) {
        __m512 wv[T];
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          const __m512i codes = _mm512_cvtepi8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[t] + c)));
          wv[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(codes), s[t], m[t]);
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          const __m512 xv = _mm512_loadu_ps(xg + r * in + c);
          _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
            acc[t][r] = _mm512_fmadd_ps(wv[t], xv, acc[t][r]);
          }
        }
      }
      if (c < gs) {
        _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
          _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
            tail[t][r] += ScalarTail8(p[t], h[t], xg + r * in, c, gs);
          }
        }
      }
    }
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      y[r * op.out + n + t] = _mm512_reduce_add_ps(acc[t][r]) + tail[t][r] + bias;
    }
  }
}

template <int R>
__attribute__((target("avx512f,avx512bw,fma"))) void Chunk512(const QuantOperands& op, int64_t r0,
                                                             int64_t n0, int64_t n1) {
  const float* x = op.x + r0 * op.in;
  float* y = op.y + r0 * op.out;
  int64_t n = n0;
  for (; n + 2 <= n1; n += 2) Tile512<R, 2>(op, x, n, y);
  if (n < n1) Tile512<R, 1>(op, x, n, y);
}

// ---- AVX2: one weight row x R input rows per tile, 8 lanes (16 vector registers).

template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void Tile256(const QuantOperands& op,
                                                                     const float* x, int64_t n,
                                                                     float* y) {
  __m256 acc[R];
  float tail[R];
  _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    tail[r] = 0;
  }
  const int64_t in = op.in, gs = op.group_size;
  const uint8_t* row = op.w + n * op.groups * op.block_bytes;
  const __m256i nibble = _mm256_set1_epi32(0xF);
  for (int64_t g = 0; g < op.groups; ++g) {
    const uint8_t* block = row + g * op.block_bytes;
    const BlockHeader h = HeaderAt(block);
    const __m256 s = _mm256_set1_ps(h.scale), m = _mm256_set1_ps(h.offset);
    const uint8_t* p = block + kPackedBlockHeaderBytes;
    const float* xg = x + g * gs;
    if (op.bits == 4) {
      for (int64_t c = 0; c < gs; c += 32) {
        // Bytes 0-7 hold inputs 0-7 (low nibbles) and 16-23 (high); bytes 8-15: 8-15, 24-31.
        __m256 w[4];
        for (int half = 0; half < 2; ++half) {
          const __m256i bytes = _mm256_cvtepu8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + c / 2 + 8 * half)));
          w[half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(bytes, nibble)), s, m);
          w[2 + half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4)), s, m);
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          const float* xr = xg + r * in + c;
          acc[r] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xr), acc[r]);
          acc[r] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xr + 8), acc[r]);
          acc[r] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xr + 16), acc[r]);
          acc[r] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xr + 24), acc[r]);
        }
      }
    } else {
      int64_t c = 0;
      for (; c + 8 <= gs; c += 8) {
        const __m256i codes =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + c)));
        const __m256 wv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(codes), s, m);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xg + r * in + c), acc[r]);
        }
      }
      if (c < gs) {
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          tail[r] += ScalarTail8(p, h, xg + r * in, c, gs);
        }
      }
    }
  }
  const float bias = op.bias != nullptr ? op.bias[n] : 0.0f;
  _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
    y[r * op.out + n] = HorizontalSum256(acc[r]) + tail[r] + bias;
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void Chunk256(const QuantOperands& op, int64_t r0, int64_t n0,
                                                  int64_t n1) {
  const float* x = op.x + r0 * op.in;
  float* y = op.y + r0 * op.out;
  for (int64_t n = n0; n < n1; ++n) Tile256<R>(op, x, n, y);
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
  for (int64_t r = 0; r < op.rows; r += 4) {
    switch (std::min<int64_t>(4, op.rows - r)) {
      case 1: Chunk256<1>(op, r, n0, n1); break;
      case 2: Chunk256<2>(op, r, n0, n1); break;
      case 3: Chunk256<3>(op, r, n0, n1); break;
      default: Chunk256<4>(op, r, n0, n1); break;
    }
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
