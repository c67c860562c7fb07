#include "model/tensor_ops.h"

#include <cmath>

namespace placer::model {

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor variance = x32.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (x32 * at::rsqrt(variance + eps)).to(x.scalar_type());
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight);
}

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t heads = q.size(0);
  const int64_t queries = q.size(1);
  const int64_t kv_heads = k.size(0);
  const int64_t keys = k.size(1);
  const int64_t head_dim = q.size(2);
  at::Tensor keys_per_head = k;
  at::Tensor values_per_head = v;
  if (kv_heads != heads) {
    keys_per_head = k.repeat_interleave(heads / kv_heads, 0);
    values_per_head = v.repeat_interleave(heads / kv_heads, 0);
  }
  at::Tensor scores = at::matmul(q, keys_per_head.transpose(1, 2)) / std::sqrt(double(head_dim));
  if (queries > 1) {
    // Query t (absolute position keys-queries+t) may see keys up to its own position.
    const at::Tensor mask =
        at::ones({queries, keys}, at::TensorOptions().dtype(at::kBool).device(scores.device())).triu(keys - queries + 1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  }
  const at::Tensor probabilities = at::softmax(scores.to(at::kFloat), -1).to(q.scalar_type());
  return at::matmul(probabilities, values_per_head);
}

}  // namespace placer::model
