// Rotary position embeddings as transformers computes them (rotate_half convention), with
// rope_scaling of types "linear", "dynamic" (NTK) and "llama3".
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "loader/model_config.h"

namespace placer::model {

class RotaryEmbedding {
 public:
  explicit RotaryEmbedding(const loader::ModelConfig& config);

  // q: [heads, T, d], k: [kv_heads, T, d] for positions start .. start+T-1, rotated in place
  // of a copy; returns {q, k}.
  std::pair<at::Tensor, at::Tensor> Apply(const at::Tensor& q, const at::Tensor& k,
                                          int64_t start) const;

  // Every row of a batch at once: q [T, heads, d], k [T, kv_heads, d], row t at positions[t].
  // Only when the frequencies do not depend on each sequence's length (see below).
  std::pair<at::Tensor, at::Tensor> ApplyRows(const at::Tensor& q, const at::Tensor& k,
                                              const std::vector<int64_t>& positions) const;
  // "dynamic" scaling rescales the frequencies by the sequence's length: such rows must go
  // through Apply one sequence at a time.
  bool length_dependent() const { return scaling_ && scaling_->rope_type == "dynamic"; }

 private:
  at::Tensor InverseFrequencies(int64_t sequence_length) const;

  int64_t head_dim_;
  double theta_;
  int64_t max_positions_;
  std::optional<loader::RopeScaling> scaling_;
  at::Tensor base_inverse_frequencies_;
};

}  // namespace placer::model
