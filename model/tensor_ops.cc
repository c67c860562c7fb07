#include "model/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/openblas_core.h"
#include "loader/quantized_weight.h"
#include "model/padded_sgemm.h"
#include "model/prompt_chunk_linear.h"
#include "model/quantized_linear.h"
#include "model/row_kernels.h"
#include "model/bf16_pairs.h"
#include "model/bf16_tiles.h"
#include "model/prompt_chunk_bf16.h"
#include "model/small_batch_bf16.h"
#include "model/small_batch_linear.h"
#include "model/widened_bf16_linear.h"

namespace placer::model {

// RMSNorm of float32 or BF16 rows in one pass each (row_kernels.h): a decode step calls it twice
// per layer, and the general form's ATen operations (each a fresh tensor and a dispatch: eight
// in BF16) cost more than the arithmetic for a few rows.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (RmsNormRowsApplies(x, weight)) return RmsNormRows(x, weight, eps);
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor variance = x32.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (x32 * at::rsqrt(variance + eps)).to(x.scalar_type());
}

namespace {

// Without AVX2 (no SmallBatchLinear): up to this many rows, a weight that stays in the CPU's
// cache after its first read is applied row by row with gemv: continuous batching's decode
// steps (a handful of rows) would otherwise pay sgemm's packing of the whole weight.
constexpr int64_t kGemvRows = 8;
constexpr int64_t kCacheResidentWeightBytes = int64_t{16} << 20;

// A decode step's few tokens from a contiguous CPU table: the rows copied, the bytes
// index_select would write. (ATen's index_select builds a TensorIterator for them: ~1.4 % of a
// small-preset decode step's calling thread, perf, bench/analysis.md.) Undefined where a token
// is out of range or the operands are of another kind: at::embedding then answers (and refuses
// a bad token with its own error).
constexpr int64_t kCopiedTokens = 64;

at::Tensor CopiedRows(const at::Tensor& table, const at::Tensor& tokens) {
  if (!table.device().is_cpu() || table.dim() != 2 || !table.is_contiguous() ||
      table.layout() != at::kStrided || !tokens.device().is_cpu() ||
      tokens.scalar_type() != at::kLong || !tokens.is_contiguous() ||
      tokens.numel() > kCopiedTokens) {
    return at::Tensor();
  }
  const int64_t* ids = tokens.data_ptr<int64_t>();
  const int64_t count = tokens.numel();
  const int64_t vocab = table.size(0);
  if (!std::all_of(ids, ids + count, [&](int64_t id) { return id >= 0 && id < vocab; })) {
    return at::Tensor();
  }
  std::vector<int64_t> shape = tokens.sizes().vec();
  shape.push_back(table.size(1));
  at::Tensor rows = at::empty(shape, table.options());
  const size_t row_bytes = static_cast<size_t>(table.size(1) * table.element_size());
  const auto* from = static_cast<const uint8_t*>(table.data_ptr());
  auto* to = static_cast<uint8_t*>(rows.data_ptr());
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(to + static_cast<size_t>(i) * row_bytes, from + static_cast<size_t>(ids[i]) * row_bytes,
                row_bytes);
  }
  return rows;
}

}  // namespace

at::Tensor EmbeddingRows(const at::Tensor& table, const at::Tensor& tokens, at::ScalarType dtype) {
  if (!loader::IsPackedWeight(table)) {
    at::Tensor rows = CopiedRows(table, tokens);
    return rows.defined() ? rows : at::embedding(table, tokens);
  }
  const at::Tensor rows = table.index_select(0, tokens.to(table.device()).reshape({-1}));
  const at::Tensor values = table.device().is_cpu()
                                ? loader::DequantizeLinearWeight(rows, dtype)
                                : loader::DequantizeLinearWeightOnDevice(rows, dtype);
  std::vector<int64_t> shape = tokens.sizes().vec();
  shape.push_back(values.size(-1));
  return values.view(shape);
}

std::vector<at::Tensor> LinearsOfOneInput(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                          const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(weights.size() == biases.size(), "LinearsOfOneInput: one bias (or none) per weight");
  const int64_t in = x.dim() >= 1 ? x.size(-1) : 0;
  const int64_t rows = in > 0 ? x.numel() / in : 0;
  // Packed weights: Linear's QuantizedLinear for each, in one call where they share a kernel.
  if (!weights.empty() && std::all_of(weights.begin(), weights.end(), [](const at::Tensor& w) {
        return loader::IsPackedWeight(w);
      })) {
    return QuantizedLinears(x, weights, biases);
  }
  // The choices Linear makes for each pair, in its order: the few-row and prompt-chunk kernels
  // only where Linear would call the same one for every weight.
  bool plain = !weights.empty();
  for (const at::Tensor& weight : weights) {
    plain = plain && !loader::IsPackedWeight(weight) && !IsBf16TileWeight(weight) &&
            !IsBf16PairWeight(weight);
  }
  // BF16 weights in pair order (Bf16PairRepacker): one parallel loop over all of them.
  const bool pairs = !weights.empty() && std::all_of(weights.begin(), weights.end(),
                                                     [](const at::Tensor& w) { return IsBf16PairWeight(w); });
  if (pairs) return Bf16PairLinears(x, weights, biases);
  const auto all = [&](const auto& applies) {
    for (size_t i = 0; i < weights.size(); ++i) {
      if (!applies(weights[i], biases[i])) return false;
    }
    return true;
  };
  const bool bf16 = plain && all([&](const at::Tensor& w, const at::Tensor& b) {
    return SmallBatchBf16Applies(x, w, b);
  });
  const Bf16Isa bf16_isa = DetectBf16Isa();
  if (bf16 && rows >= 1 && rows <= SmallBatchBf16MaxRows(bf16_isa)) {
    return SmallBatchLinearsBf16(x, weights, biases, bf16_isa);
  }
  if (bf16 && PromptChunkBf16Takes(rows)) return PromptChunkLinearsBf16(x, weights, biases);
  const bool f32 = plain && all([&](const at::Tensor& w, const at::Tensor& b) {
    return !SmallBatchBf16Applies(x, w, b) && SmallBatchLinearApplies(x, w, b);
  });
  const VectorIsa isa = DetectVectorIsa();
  if (f32 && PromptChunkLinearTakes(rows)) return PromptChunkLinears(x, weights, biases);
  if (f32 && rows >= 1 && rows <= SmallBatchLinearMaxRows(isa)) {
    return SmallBatchLinears(x, weights, biases, isa);
  }
  std::vector<at::Tensor> ys;
  for (size_t i = 0; i < weights.size(); ++i) ys.push_back(Linear(x, weights[i], biases[i]));
  return ys;
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t in = x.dim() >= 1 ? x.size(-1) : 0;
  const int64_t rows = in > 0 ? x.numel() / in : 0;
  // Packed weights (--quantize, quantized checkpoints) are read in their packed bytes.
  if (loader::IsPackedWeight(weight)) return QuantizedLinear(x, weight, bias);
  // BF16 weights in AMX tile order (packed on the block's first call: Bf16TileRepacker).
  if (IsBf16TileWeight(weight)) return Bf16TileLinear(x, weight, bias);
  // BF16 weights in pair order (AVX512-BF16 without AMX: Bf16PairRepacker).
  if (IsBf16PairWeight(weight)) return Bf16PairLinear(x, weight, bias);
  // BF16 weights (a BF16 checkpoint served as it is): a decode step's few rows read each
  // weight once; prompt chunks to the BF16 prompt-chunk kernel with AVX512-BF16, to float32
  // sgemm on AVX2 alone, else to ATen's BF16 GEMM below.
  const Bf16Isa bf16 = DetectBf16Isa();
  if (rows >= 1 && rows <= SmallBatchBf16MaxRows(bf16) && SmallBatchBf16Applies(x, weight, bias)) {
    return SmallBatchLinearBf16(x, weight, bias, bf16);
  }
  if (PromptChunkBf16Takes(rows) && SmallBatchBf16Applies(x, weight, bias)) {
    return PromptChunkLinearBf16(x, weight, bias);
  }
  // Where ATen's BF16 GEMM is scalar (AVX2 alone), longer chunks widened for sgemm.
  if (WidenedBf16LinearTakes(rows) && SmallBatchBf16Applies(x, weight, bias)) {
    return WidenedBf16Linear(x, weight, bias);
  }
  // F32 prompt chunks of 33-128 rows to the prompt-chunk kernel (AVX-512), the few-row kernels'
  // rows to them, the rest to sgemm.
  if (PromptChunkLinearTakes(rows) && SmallBatchLinearApplies(x, weight, bias)) {
    return PromptChunkLinear(x, weight, bias);
  }
  const VectorIsa isa = DetectVectorIsa();
  if (rows >= 1 && rows <= SmallBatchLinearMaxRows(isa) &&
      SmallBatchLinearApplies(x, weight, bias)) {
    return SmallBatchLinear(x, weight, bias, isa);
  }
  const bool plain_bias = !bias.defined() || bias.dim() == 1;
  const bool gemv_able = rows >= 1 && plain_bias && weight.dim() == 2 && x.device().is_cpu() &&
                         x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat;
  const bool cache_resident =
      weight.numel() * static_cast<int64_t>(weight.element_size()) <= kCacheResidentWeightBytes;
  if (gemv_able && (rows == 1 || (rows <= kGemvRows && cache_resident))) {
    // One row (batch-1 decode) always: sgemm with M = 1 first packs (copies) the whole weight,
    // reading every byte three times, where gemv reads it once.
    const at::Tensor flat = x.reshape({rows, in});
    at::Tensor y = at::empty({rows, weight.size(0)}, x.options());
    for (int64_t r = 0; r < rows; ++r) {
      at::Tensor out = y[r];
      if (bias.defined()) {
        at::addmv_out(out, bias, weight, flat[r]);
      } else {
        at::mv_out(out, weight, flat[r]);
      }
    }
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return y.view(shape);
  }
  // Longer float32 chunks to sgemm, their rows padded where OpenBLAS's threads split them badly.
  if (gemv_able) return PaddedSgemmLinear(x, weight, bias, base::OpenBlasThreads());
  return bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight);
}

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t window) {
  const int64_t heads = q.size(0);
  const int64_t queries = q.size(1);
  const int64_t kv_heads = k.size(0);
  const int64_t head_dim = q.size(2);
  const int64_t group = heads / kv_heads;
  // Keys before the first query's window are seen by no query: leave them out.
  const int64_t unseen = window > 0 ? std::max<int64_t>(0, k.size(1) - queries - window + 1) : 0;
  const at::Tensor keys_seen = k.narrow(1, unseen, k.size(1) - unseen);
  const at::Tensor values_seen = v.narrow(1, unseen, v.size(1) - unseen);
  const int64_t keys = keys_seen.size(1);
  // Grouped-query attention without copying the keys and values per query head: the query
  // heads sharing kv head h (h*group .. h*group+group-1) become rows of one matrix product.
  const at::Tensor grouped = q.reshape({kv_heads, group * queries, head_dim});
  at::Tensor scores = at::matmul(grouped, keys_seen.transpose(1, 2)) / std::sqrt(double(head_dim));
  if (queries > 1) {
    // Query t (position p = keys-queries+t among these keys) sees keys p - window + 1 .. p.
    const auto bool_options = at::TensorOptions().dtype(at::kBool).device(scores.device());
    at::Tensor mask = at::ones({queries, keys}, bool_options).triu(keys - queries + 1);
    if (window > 0) {
      mask = mask.logical_or(at::ones({queries, keys}, bool_options).tril(keys - queries - window));
    }
    scores = scores.view({kv_heads, group, queries, keys})
                 .masked_fill(mask, -std::numeric_limits<float>::infinity())
                 .view({kv_heads, group * queries, keys});
  }
  const at::Tensor probabilities = at::softmax(scores.to(at::kFloat), -1).to(q.scalar_type());
  return at::matmul(probabilities, values_seen).view({heads, queries, head_dim});
}

}  // namespace placer::model
