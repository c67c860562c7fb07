// The arithmetic that the architectures share, written once in Hugging Face's conventions
// so that logits match transformers' to float rounding.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace placer::model {

// Llama's RMSNorm: computed in float32, then scaled by the weight.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// x @ weight^T (+ bias): weight stored [out, in] as nn.Linear stores it, or packed
// (loader/quantized_weight.h: model/quantized_linear.h multiplies it).
at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// x times each weight (+ its bias; undefined for none): the projections of one input (a layer's
// q, k and v; gate and up). Where one few-row or prompt-chunk kernel takes every pair, one call
// of it (one parallel loop over every weight; prompt chunks rearranged once); else Linear of
// each. Either way result i is Linear(x, weights[i], biases[i]) bit for bit.
std::vector<at::Tensor> LinearsOfOneInput(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                          const std::vector<at::Tensor>& biases);

// Rows `tokens` (int64) of an embedding table in `dtype`: at::embedding of a table in the
// compute dtype, or the rows of a packed table (a tied lm_head under --quantize-lm-head)
// dequantized exactly (loader::DequantizeLinearWeight), as llama.cpp reads its quantized
// token_embd.
at::Tensor EmbeddingRows(const at::Tensor& table, const at::Tensor& tokens, at::ScalarType dtype);

// Scaled dot-product attention over [heads, T, d] queries and [kv_heads, S, d] keys/values,
// where the T queries sit at positions S-T .. S-1 (causal). kv heads are shared by
// heads / kv_heads query heads (grouped-query attention). window > 0 (Mistral's sliding
// window): the query at position p sees keys p - window + 1 .. p only.
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t window = 0);

}  // namespace placer::model
