#include "model/decode_attention.h"

#include <ATen/Parallel.h>

// See small_batch_out_in.cc: GCC 12's intrinsics headers warn about themselves.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/decode_attention_rows.h"
#include "model/spinning_workers.h"
#include "model/vector_sum.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

// BF16 is the top half of a float: widening is a 16-bit shift.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 LoadWidened(
    const at::BFloat16* x) {
  const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
}
__attribute__((target("avx2,fma"), always_inline)) inline __m256 LoadWidened(const float* x) {
  return _mm256_loadu_ps(x);
}

template <typename T>
__attribute__((target("avx2,fma"))) float DotAvx2(const float* a, const T* b, int64_t n) {
  __m256 even = _mm256_setzero_ps();
  __m256 odd = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    even = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), LoadWidened(b + i), even);
    odd = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), LoadWidened(b + i + 8), odd);
  }
  for (; i + 8 <= n; i += 8) {
    even = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), LoadWidened(b + i), even);
  }
  float total = HorizontalSum256(_mm256_add_ps(even, odd));
  for (; i < n; ++i) total += a[i] * static_cast<float>(b[i]);
  return total;
}

template <typename T>
__attribute__((target("avx2,fma"))) void AxpyAvx2(float* y, float a, const T* x, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, LoadWidened(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * static_cast<float>(x[i]);
}

template <typename T>
float DotPlain(const float* a, const T* b, int64_t n) {
  float total = 0.0f;
  for (int64_t i = 0; i < n; ++i) total += a[i] * static_cast<float>(b[i]);
  return total;
}

template <typename T>
void AxpyPlain(float* y, float a, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * static_cast<float>(x[i]);
}

// One row and one kv head: the query heads of its group (its key and value already stored).
template <typename T, bool kAvx2>
void AttendGroup(const AttentionOperands<T>& op, const DecodeRow& row, int64_t kv_head) {
  auto dot = kAvx2 ? DotAvx2<T> : DotPlain<T>;
  auto axpy = kAvx2 ? AxpyAvx2<T> : AxpyPlain<T>;
  const int64_t d = op.head_dim;
  const GroupTask<T> task = PrepareGroup(op, row, kv_head);
  const int64_t group = task.group;
  const int64_t seen = task.seen;
  float* scores = task.scores;
  thread_local base::CacheLineVector<float> sums;
  sums.assign(static_cast<size_t>(group * d), 0.0f);
  // Each key is read once for the whole group.
  for (int64_t j = 0; j < seen; ++j) {
    const T* key = task.keys + task.slots[j] * d;
    for (int64_t g = 0; g < group; ++g) {
      scores[g * seen + j] = dot(task.queries + g * d, key, d) * op.scale;
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    float* s = scores + g * seen;
    const float largest = *std::max_element(s, s + seen);
    float total = 0.0f;
    for (int64_t j = 0; j < seen; ++j) {
      s[j] = std::exp(s[j] - largest);
      total += s[j];
    }
    const float inverse = 1.0f / total;
    for (int64_t j = 0; j < seen; ++j) s[j] *= inverse;
  }
  for (int64_t j = 0; j < seen; ++j) {
    const T* value = task.values + task.slots[j] * d;
    for (int64_t g = 0; g < group; ++g) axpy(sums.data() + g * d, scores[g * seen + j], value, d);
  }
  for (int64_t i = 0; i < group * d; ++i) task.out[i] = static_cast<T>(sums[static_cast<size_t>(i)]);
}

bool Served(at::ScalarType type) { return type == at::kFloat || type == at::kBFloat16; }

bool RowsOfHeads(const at::Tensor& t, at::ScalarType type, int64_t heads, int64_t head_dim) {
  return t.device().is_cpu() && t.scalar_type() == type && t.dim() == 3 &&
         t.size(1) == heads && t.size(2) == head_dim && t.stride(2) == 1 &&
         t.stride(1) == head_dim;
}

template <typename T>
void AttendRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& keys,
                at::Tensor& values, int64_t window, const std::vector<DecodeRow>& rows,
                at::Tensor& out, VectorIsa isa) {
  const int64_t heads = q.size(1);
  const int64_t head_dim = keys.size(2);
  const AttentionOperands<T> op{q.data_ptr<T>(),
                       k.data_ptr<T>(),
                       v.data_ptr<T>(),
                       q.stride(0),
                       k.stride(0),
                       v.stride(0),
                       keys.data_ptr<T>(),
                       values.data_ptr<T>(),
                       keys.size(1),
                       out.data_ptr<T>(),
                       heads,
                       keys.size(0),
                       head_dim,
                       window,
                       static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)))};
  // Every row's key and value before any attention: the rows of a prompt chunk read the keys
  // of the rows before them (a memcpy of a head's keys per row: microseconds a layer).
  for (const DecodeRow& row : rows) {
    const int64_t slot = SlotOf(row, row.position);
    for (int64_t kv_head = 0; kv_head < op.kv_heads; ++kv_head) {
      const int64_t at = (kv_head * op.pool_positions + slot) * head_dim;
      std::memcpy(op.key_pool + at, op.k + row.row * op.k_row + kv_head * head_dim, sizeof(T) * head_dim);
      std::memcpy(op.value_pool + at, op.v + row.row * op.v_row + kv_head * head_dim, sizeof(T) * head_dim);
    }
  }
  const bool avx512 = isa == VectorIsa::kAvx512 && Avx512AttendTakes(head_dim);
  const bool avx2 = isa != VectorIsa::kNone;
  const int64_t tasks = static_cast<int64_t>(rows.size()) * op.kv_heads;
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const DecodeRow& row = rows[static_cast<size_t>(task / op.kv_heads)];
      if (avx512) {
        AttendGroupAvx512<T>(op, row, task % op.kv_heads);
      } else if (avx2) {
        AttendGroup<T, true>(op, row, task % op.kv_heads);
      } else {
        AttendGroup<T, false>(op, row, task % op.kv_heads);
      }
    }
  };
  if (tasks == 0) return;
  if (!SpinningWorkers::Shared().TryRun(tasks, run)) at::parallel_for(0, tasks, 1, run);
}

}  // namespace

bool RowAttentionTakesAnyLength(int64_t head_dim, VectorIsa isa) {
  return isa == VectorIsa::kAvx512 && Avx512AttendTakes(head_dim);
}

bool DecodeAttentionApplies(KvBlockPool& pool, int64_t layer, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v) {
  return RowAttentionApplies(pool.keys(layer), pool.values(layer), q, k, v);
}

bool RowAttentionApplies(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& q,
                         const at::Tensor& k, const at::Tensor& v) {
  const at::ScalarType type = keys.scalar_type();
  if (!keys.device().is_cpu() || !Served(type) || values.scalar_type() != type ||
      !keys.is_contiguous() || !values.is_contiguous() || keys.dim() != 3 ||
      values.sizes() != keys.sizes() || q.dim() != 3) {
    return false;
  }
  const int64_t kv_heads = keys.size(0);
  const int64_t head_dim = keys.size(2);
  const int64_t heads = q.size(1);
  return kv_heads > 0 && heads % kv_heads == 0 && RowsOfHeads(q, type, heads, head_dim) &&
         RowsOfHeads(k, type, kv_heads, head_dim) && RowsOfHeads(v, type, kv_heads, head_dim);
}

void DecodeAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     KvBlockPool& pool, int64_t layer, int64_t window,
                     const std::vector<DecodeRow>& rows, at::Tensor& out, VectorIsa isa) {
  RowAttention(q, k, v, pool.keys(layer), pool.values(layer), window, rows, out, isa);
}

void RowAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& keys,
                  at::Tensor& values, int64_t window, const std::vector<DecodeRow>& rows,
                  at::Tensor& out, VectorIsa isa) {
  TORCH_CHECK(RowAttentionApplies(keys, values, q, k, v), "DecodeAttention: unsupported operands");
  const int64_t heads = q.size(1);
  const int64_t head_dim = keys.size(2);
  TORCH_CHECK(out.is_contiguous() && out.scalar_type() == keys.scalar_type() && out.dim() == 2 &&
                  out.size(0) == q.size(0) && out.size(1) == heads * head_dim,
              "DecodeAttention: out must be contiguous [rows, heads * head_dim] of the pool's dtype");
  const int64_t positions = keys.size(1);
  for (const DecodeRow& row : rows) {
    const int64_t held = static_cast<int64_t>(row.blocks->size()) * KvBlockPool::kBlockPositions;
    bool blocks_inside = true;
    for (int32_t block : *row.blocks) {
      blocks_inside = blocks_inside && block >= 0 &&
                      (static_cast<int64_t>(block) + 1) * KvBlockPool::kBlockPositions <= positions;
    }
    // Blocks holding fewer positions than the row's are a ring: its window must fit them.
    TORCH_CHECK(row.row >= 0 && row.row < q.size(0) && row.position >= 0 && held > 0 &&
                    blocks_inside && (row.position < held || (window > 0 && window <= held)),
                "DecodeAttention: row ", row.row, " at position ", row.position,
                " is outside its inputs or its ", held, " positions of blocks");
  }
  if (keys.scalar_type() == at::kBFloat16) {
    AttendRows<at::BFloat16>(q, k, v, keys, values, window, rows, out, isa);
  } else {
    AttendRows<float>(q, k, v, keys, values, window, rows, out, isa);
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
