// DecodeAttention's AVX-512 kernel: one row and one kv head per call, every accumulator in a
// register. Scores take 16 keys at a time, each key a chain of head_dim / 16 multiply-adds,
// and sum the 16 chains' lanes together (HorizontalSums512x16) instead of one reduction per
// key; the softmax's exponentials are 16 at a time; the weighted values of several query heads
// are summed in registers, each value row widened once for all of them. The AVX2 kernel
// (decode_attention.cc) called a dot product and an axpy through memory per key and head.
#include "model/decode_attention_rows.h"

#include <ATen/ATen.h>

// See small_batch_out_in.cc: GCC 12's intrinsics headers warn about themselves.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/bf16_rounding.h"
#include "model/vector_sum.h"

namespace placer::model {
namespace {

constexpr int64_t kMostChunks = 8;  // head_dim up to 128
constexpr int64_t kKeysPerBlock = 16;

__attribute__((target("avx512f"), always_inline)) inline __m512 Load16(const float* x) {
  return _mm512_loadu_ps(x);
}
__attribute__((target("avx512f"), always_inline)) inline __m512 Load16(const at::BFloat16* x) {
  return WidenBf16Bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

__attribute__((target("avx512f"), always_inline)) inline void Store16(__m512 v, float* y) {
  _mm512_storeu_ps(y, v);
}
__attribute__((target("avx512f"), always_inline)) inline void Store16(__m512 v, at::BFloat16* y) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), RoundToBf16Bits(v));
}

// e^x for x <= 0 (a score minus the largest), to ~1 ulp: Cephes' expf polynomial on
// x - n ln 2, scaled by 2^n. Below -87.3 (e^x under FLT_MIN) it gives e^-87.3 or 0 instead of
// a denormal: nothing a softmax sum of at least 1 can see.
__attribute__((target("avx512f"), always_inline)) inline __m512 ExpNonPositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

__attribute__((target("avx512f"), always_inline)) inline __mmask16 FirstLanes(int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1);
}

// Each query head's scores over the seen positions, scaled, then their softmax in place.
template <typename T, int C>
__attribute__((target("avx512f"))) void Scores(const AttentionOperands<T>& op, const T* keys,
                                               const int64_t* slots, int64_t seen,
                                               const float* queries, int64_t group,
                                               float* scores) {
  const int64_t d = op.head_dim;
  const __m512 scale = _mm512_set1_ps(op.scale);
  // Key blocks outside, query heads inside: a block's keys are read from memory once.
  for (int64_t j0 = 0; j0 < seen; j0 += kKeysPerBlock) {
    const int64_t count = std::min(kKeysPerBlock, seen - j0);
    for (int64_t g = 0; g < group; ++g) {
      __m512 q[C];
      for (int c = 0; c < C; ++c) q[c] = _mm512_loadu_ps(queries + g * d + 16 * c);
      __m512 acc[16];
      for (int jj = 0; jj < 16; ++jj) {
        if (jj >= count) {
          acc[jj] = _mm512_setzero_ps();
          continue;
        }
        const T* key = keys + slots[j0 + jj] * d;
        __m512 sum = _mm512_mul_ps(q[0], Load16(key));
        for (int c = 1; c < C; ++c) sum = _mm512_fmadd_ps(q[c], Load16(key + 16 * c), sum);
        acc[jj] = sum;
      }
      _mm512_mask_storeu_ps(scores + g * seen + j0, FirstLanes(count),
                            _mm512_mul_ps(HorizontalSums512x16(acc), scale));
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    float* s = scores + g * seen;
    __m512 largest = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < seen; j += 16) {
      largest = _mm512_max_ps(largest,
                              _mm512_mask_loadu_ps(largest, FirstLanes(seen - j), s + j));
    }
    const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(largest));
    __m512 total = _mm512_setzero_ps();
    for (int64_t j = 0; j < seen; j += 16) {
      const __mmask16 lanes = FirstLanes(seen - j);
      const __m512 e = ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, s + j), top));
      total = _mm512_add_ps(total, _mm512_maskz_mov_ps(lanes, e));
      _mm512_mask_storeu_ps(s + j, lanes, e);
    }
    const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(total));
    for (int64_t j = 0; j < seen; j += 16) {
      const __mmask16 lanes = FirstLanes(seen - j);
      _mm512_mask_storeu_ps(s + j, lanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, s + j), inverse));
    }
  }
}

// out rows of query heads [g0, g0 + n), n <= H: the probabilities' weighted sum of the values.
template <typename T, int C, int H>
__attribute__((target("avx512f"))) void WeightedValues(const AttentionOperands<T>& op,
                                                       const T* values, const int64_t* slots,
                                                       int64_t seen, const float* scores,
                                                       int64_t g0, int64_t n, T* out) {
  const int64_t d = op.head_dim;
  __m512 acc[H][C];
  for (int h = 0; h < H; ++h) {
    for (int c = 0; c < C; ++c) acc[h][c] = _mm512_setzero_ps();
  }
  for (int64_t j = 0; j < seen; ++j) {
    const T* value = values + slots[j] * d;
    __m512 v[C];
    for (int c = 0; c < C; ++c) v[c] = Load16(value + 16 * c);
    for (int h = 0; h < H; ++h) {
      if (h >= n) break;
      const __m512 p = _mm512_set1_ps(scores[(g0 + h) * seen + j]);
      for (int c = 0; c < C; ++c) acc[h][c] = _mm512_fmadd_ps(p, v[c], acc[h][c]);
    }
  }
  for (int h = 0; h < H; ++h) {
    if (h >= n) break;
    for (int c = 0; c < C; ++c) Store16(acc[h][c], out + (g0 + h) * d + 16 * c);
  }
}

template <typename T, int C>
__attribute__((target("avx512f"))) void Attend(const AttentionOperands<T>& op, const DecodeRow& row,
                                               int64_t kv_head) {
  // Query heads whose value sums fit the registers beside one value row: (H + 1) C <= ~28.
  constexpr int H = std::clamp((28 - C) / C, 1, 8);
  const GroupTask<T> task = PrepareGroup(op, row, kv_head);
  Scores<T, C>(op, task.keys, task.slots, task.seen, task.queries, task.group, task.scores);
  for (int64_t g0 = 0; g0 < task.group; g0 += H) {
    WeightedValues<T, C, H>(op, task.values, task.slots, task.seen, task.scores, g0,
                            std::min<int64_t>(H, task.group - g0), task.out);
  }
}

}  // namespace

bool Avx512AttendTakes(int64_t head_dim) {
  return head_dim > 0 && head_dim % 16 == 0 && head_dim / 16 <= kMostChunks;
}

template <typename T>
void AttendGroupAvx512(const AttentionOperands<T>& op, const DecodeRow& row, int64_t kv_head) {
  switch (op.head_dim / 16) {
    case 1: return Attend<T, 1>(op, row, kv_head);
    case 2: return Attend<T, 2>(op, row, kv_head);
    case 3: return Attend<T, 3>(op, row, kv_head);
    case 4: return Attend<T, 4>(op, row, kv_head);
    case 5: return Attend<T, 5>(op, row, kv_head);
    case 6: return Attend<T, 6>(op, row, kv_head);
    case 7: return Attend<T, 7>(op, row, kv_head);
    case 8: return Attend<T, 8>(op, row, kv_head);
    default: TORCH_CHECK(false, "AttendGroupAvx512: head_dim ", op.head_dim, " is not taken");
  }
}

template void AttendGroupAvx512<float>(const AttentionOperands<float>&, const DecodeRow&, int64_t);
template void AttendGroupAvx512<at::BFloat16>(const AttentionOperands<at::BFloat16>&,
                                              const DecodeRow&, int64_t);

}  // namespace placer::model

#pragma GCC diagnostic pop
