// Attention for the decode rows of a step (one new token of a sequence that has a KV cache),
// and for the rows of short prompt chunks, computed straight over the paged pool.
//
// Through ATen, one sequence's attention is some 25 small operators (views, the KV write, two
// tiny matrix products, softmax, the reshape back), ~120 us per sequence per layer on this
// CPU whatever the length: with 8 streams that was half of a decode step
// (bench/analysis.md). This kernel does a whole step's decode rows in one call: it writes
// each new key and value into its block, and walks each sequence's block table reading
// every cached key and value once for all the query heads that share it.
//
// Batch invariance: a row's result depends only on its own query and cache (fixed summation
// order, whatever other rows are in the call or how the rows are split among threads).
//
// BF16 pools (a BF16 model's KV cache) are read as they are stored, at half the bytes of
// float; scores, softmax and the weighted sum of values are float, and each output element
// is rounded to BF16 once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/kv_block_pool.h"
#include "model/small_batch_linear.h"

namespace placer::model {

struct DecodeRow {
  int64_t row;                         // its row in q, k, v and out
  int64_t position;                    // the new token's position (keys 0..position exist after)
  const std::vector<int32_t>* blocks;  // its block table in the pool; a ring when shorter
                                       // than position + 1 (KvCache)
};

// True when `layer`'s pool and q (see DecodeAttention) are what the kernel takes: float32 or
// BF16 on the CPU, q/k/v of the pool's dtype, the pool contiguous, q/k/v rows of
// [heads, head_dim] contiguous inside.
bool DecodeAttentionApplies(KvBlockPool& pool, int64_t layer, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v);

// For every row r in `rows`: stores k[r], v[r] ([kv_heads, head_dim]) at r.position in
// `layer`'s pool (every row's before any attention, so that several rows of one sequence at
// consecutive positions, a prompt chunk, see each other's keys; such rows must not wrap a
// ring), then out[r] = softmax(q[r] . keys^T / sqrt(head_dim)) . values over
// positions max(0, position - window + 1) .. position (window 0: all), each query head with
// the kv head of its group. q: [rows, heads, head_dim], k and v: [rows, kv_heads, head_dim]
// (any row stride), out: [rows, heads * head_dim] contiguous, of the pool's dtype; rows not
// listed are untouched.
// `isa` kNone: plain C++ loops (CPUs without AVX2; tests); kAvx512: 16 keys' scores at a time
// with every sum in a register, for head sizes of whole 16-float vectors up to 128 (others go
// through the AVX2 loops).
void DecodeAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     KvBlockPool& pool, int64_t layer, int64_t window,
                     const std::vector<DecodeRow>& rows, at::Tensor& out,
                     VectorIsa isa = DetectVectorIsa());

// Whether `isa` runs the AVX-512 kernel for heads of `head_dim`: rows of prompts of any length
// then attend faster through DecodeAttention than through ATen (PromptRowsAttendAsDecodeRows).
bool RowAttentionTakesAnyLength(int64_t head_dim, VectorIsa isa = DetectVectorIsa());

// The same over keys and values held in plain tensors instead of a pool's layer: `keys` and
// `values` [kv_heads, positions, head_dim], contiguous, of q's dtype, addressed through each
// row's block table as a pool's are. A one-off Forward's short prompt goes through it over a
// scratch buffer, so its rows get the bits that a cached sequence's rows get.
bool RowAttentionApplies(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& q,
                         const at::Tensor& k, const at::Tensor& v);
void RowAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& keys,
                  at::Tensor& values, int64_t window, const std::vector<DecodeRow>& rows,
                  at::Tensor& out, VectorIsa isa = DetectVectorIsa());

}  // namespace placer::model
