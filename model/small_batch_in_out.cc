// The kernels for weights stored [in, out] (GPT-2's Conv1D): see small_batch_linear.h.
//
// A vector holds 16 (AVX-512) or 8 (AVX2) neighbouring outputs of one input row. Weight rows
// are read four at a time, each as one contiguous run across the thread's columns (what the
// hardware prefetcher follows); the accumulators live in y between runs. Every output is
// y = fma(x[k], w[k], y) for k = 0, 1, ... in order, then + bias, whatever the batch.
#include <ATen/ATen.h>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it themselves
// (maybe-uninitialized, GCC bug 105593, fixed in GCC 13) wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "model/small_batch_kernels.h"

namespace placer::model {
namespace {

// Weight rows consumed per pass over the columns (accumulators stay in registers meanwhile).
constexpr int kRowsPerPass = 4;
// Weight rows per block: a block (times the thread's columns) stays in cache while every
// chunk of input rows goes through it, so more than one chunk reads it from memory once.
constexpr int64_t kBlockRows = 64;

template <int R>
__attribute__((target("avx512f,avx2,fma"))) void Chunk512(const Operands& op, int64_t m,
                                                          int64_t k0, int64_t k1, int64_t n0,
                                                          int64_t n1) {
  const float* x = op.x + m * op.in;
  float* y = op.y + m * op.out;
  for (int64_t k = k0; k < k1; k += kRowsPerPass) {
    const int64_t count = std::min<int64_t>(kRowsPerPass, k1 - k);
    for (int64_t n = n0; n < n1; n += 16) {
      const auto mask = static_cast<__mmask16>(n1 - n >= 16 ? 0xFFFF : (1u << (n1 - n)) - 1);
      __m512 acc[R];
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        acc[r] = k == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + r * op.out + n);
      }
      for (int64_t i = 0; i < count; ++i) {
        const __m512 w = _mm512_maskz_loadu_ps(mask, op.weight + (k + i) * op.out + n);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * op.in + k + i]), w, acc[r]);
        }
      }
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        _mm512_mask_storeu_ps(y + r * op.out + n, mask, acc[r]);
      }
    }
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void Chunk256(const Operands& op, int64_t m, int64_t k0,
                                                  int64_t k1, int64_t n0, int64_t n1) {
  const float* x = op.x + m * op.in;
  float* y = op.y + m * op.out;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t k = k0; k < k1; k += kRowsPerPass) {
    const int64_t count = std::min<int64_t>(kRowsPerPass, k1 - k);
    for (int64_t n = n0; n < n1; n += 8) {
      const auto width = static_cast<int>(std::min<int64_t>(8, n1 - n));
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(width), lane);
      __m256 acc[R];
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        acc[r] = k == 0 ? _mm256_setzero_ps() : _mm256_maskload_ps(y + r * op.out + n, mask);
      }
      for (int64_t i = 0; i < count; ++i) {
        const __m256 w = _mm256_maskload_ps(op.weight + (k + i) * op.out + n, mask);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
          acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r * op.in + k + i]), w, acc[r]);
        }
      }
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        _mm256_maskstore_ps(y + r * op.out + n, mask, acc[r]);
      }
    }
  }
}

template <int R>
void Chunk(VectorIsa isa, const Operands& op, int64_t m, int64_t k0, int64_t k1, int64_t n0,
           int64_t n1) {
  if (isa == VectorIsa::kAvx512) {
    Chunk512<R>(op, m, k0, k1, n0, n1);
  } else {
    Chunk256<R>(op, m, k0, k1, n0, n1);
  }
}

}  // namespace

void InOutWeightColumns(VectorIsa isa, const Operands& op, int64_t n0, int64_t n1) {
  const int64_t chunk = isa == VectorIsa::kAvx512 ? 8 : 4;
  for (int64_t k0 = 0; k0 < op.in; k0 += kBlockRows) {
    const int64_t k1 = std::min(op.in, k0 + kBlockRows);
    for (int64_t m = 0; m < op.rows; m += chunk) {
      switch (std::min(chunk, op.rows - m)) {
        case 1: Chunk<1>(isa, op, m, k0, k1, n0, n1); break;
        case 2: Chunk<2>(isa, op, m, k0, k1, n0, n1); break;
        case 3: Chunk<3>(isa, op, m, k0, k1, n0, n1); break;
        case 4: Chunk<4>(isa, op, m, k0, k1, n0, n1); break;
        case 5: Chunk<5>(isa, op, m, k0, k1, n0, n1); break;
        case 6: Chunk<6>(isa, op, m, k0, k1, n0, n1); break;
        case 7: Chunk<7>(isa, op, m, k0, k1, n0, n1); break;
        default: Chunk<8>(isa, op, m, k0, k1, n0, n1); break;
      }
    }
  }
  if (op.bias == nullptr) return;
  for (int64_t m = 0; m < op.rows; ++m) {
    float* y = op.y + m * op.out;
    for (int64_t n = n0; n < n1; ++n) y[n] += op.bias[n];
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
