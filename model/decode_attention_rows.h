// What decode_attention.cc hands one (row, kv head) task: the operands of a call and where a
// row's positions lie in the pool. Internal to DecodeAttention and its ISA kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/decode_attention.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// T: the pool's and q/k/v/out's element type (float or BFloat16). Scores, softmax and the
// weighted sum of values are float either way; a BF16 row is rounded once, at the end.
template <typename T>
struct AttentionOperands {
  const T* q;
  const T* k;
  const T* v;
  int64_t q_row, k_row, v_row;  // row strides
  T* key_pool;                  // [kv_heads, pool_positions, head_dim]
  T* value_pool;
  int64_t pool_positions;
  T* out;  // [rows, heads * head_dim]
  int64_t heads, kv_heads, head_dim;
  int64_t window;
  float scale;
};

// The pool position of a row's sequence position (a ring's table wraps: KvCache).
inline int64_t SlotOf(const DecodeRow& row, int64_t position) {
  constexpr int64_t kBlock = KvBlockPool::kBlockPositions;
  const std::vector<int32_t>& blocks = *row.blocks;
  const auto entries = static_cast<int64_t>(blocks.size());
  return static_cast<int64_t>(blocks[static_cast<size_t>((position / kBlock) % entries)]) * kBlock +
         position % kBlock;
}

// slots[j] = SlotOf(row, first + j) for j < count: one table lookup (and division) per block
// of positions instead of one per position.
inline void SlotsOf(const DecodeRow& row, int64_t first, int64_t count, int64_t* slots) {
  constexpr int64_t kBlock = KvBlockPool::kBlockPositions;
  int64_t j = 0;
  for (int64_t position = first; j < count;) {
    const int64_t base = SlotOf(row, position) - position % kBlock;
    const int64_t block_end = std::min(count, j + kBlock - position % kBlock);
    for (; j < block_end; ++j, ++position) slots[j] = base + position % kBlock;
  }
}

// The first position a row attends to (its window's start, or 0).
inline int64_t FirstSeen(const DecodeRow& row, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, row.position - window + 1) : 0;
}

// What a (row, kv head) task reads and writes: the row's pool slots from `first` on, the group's
// queries widened to float, room for each query head's `seen` scores (the buffers are the
// calling thread's, reused by its next task), the kv head's planes and the group's out row.
template <typename T>
struct GroupTask {
  int64_t first, seen, group;
  const int64_t* slots;  // [seen]
  const float* queries;  // [group, head_dim]
  float* scores;         // [group, seen]
  const T* keys;
  const T* values;
  T* out;  // [group, head_dim]
};

template <typename T>
GroupTask<T> PrepareGroup(const AttentionOperands<T>& op, const DecodeRow& row, int64_t kv_head) {
  thread_local std::vector<int64_t> slots;
  thread_local base::CacheLineVector<float> queries;
  thread_local base::CacheLineVector<float> scores;
  const int64_t d = op.head_dim;
  const int64_t group = op.heads / op.kv_heads;
  const int64_t first = FirstSeen(row, op.window);
  const int64_t seen = row.position - first + 1;
  slots.resize(static_cast<size_t>(seen));
  SlotsOf(row, first, seen, slots.data());
  queries.resize(static_cast<size_t>(group * d));
  scores.resize(static_cast<size_t>(group * seen));
  const T* group_queries = op.q + row.row * op.q_row + kv_head * group * d;
  for (int64_t i = 0; i < group * d; ++i) {
    queries[static_cast<size_t>(i)] = static_cast<float>(group_queries[i]);
  }
  return {first,
          seen,
          group,
          slots.data(),
          queries.data(),
          scores.data(),
          op.key_pool + kv_head * op.pool_positions * d,
          op.value_pool + kv_head * op.pool_positions * d,
          op.out + row.row * op.heads * d + kv_head * group * d};
}

// The AVX-512 kernel (decode_attention_avx512.cc) takes head sizes of whole 16-float vectors
// up to 128: its accumulators live in the 32 vector registers.
bool Avx512AttendTakes(int64_t head_dim);

// out for `row`'s query heads of `kv_head`'s group, as AttendGroup in decode_attention.cc
// computes them (scores, softmax, weighted values, in float) with AVX-512F; needs a CPU with
// AVX-512F and Avx512AttendTakes(op.head_dim).
template <typename T>
void AttendGroupAvx512(const AttentionOperands<T>& op, const DecodeRow& row, int64_t kv_head);

}  // namespace placer::model
