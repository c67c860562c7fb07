// What every decoder-only architecture shares around its arithmetic: checking the request,
// turning token ids into a tensor, catching libtorch's exceptions at the module border,
// and copying logits out.
#pragma once

#include <ATen/ATen.h>

#include "loader/model_config.h"
#include "model/causal_lm.h"

namespace placer::model {

class DecoderOnlyModel : public CausalLm {
 public:
  explicit DecoderOnlyModel(const loader::ModelConfig& config) : config_(config) {}

  absl::StatusOr<Logits> Forward(const std::vector<int32_t>& token_ids,
                                 bool all_positions) const final;
  int64_t vocab_size() const final { return config_.vocab_size; }
  int64_t max_positions() const final { return config_.max_position_embeddings; }

 protected:
  // tokens: int64 [T], positions 0..T-1. Returns logits [T, vocab].
  virtual at::Tensor Run(const at::Tensor& tokens) const = 0;
  const loader::ModelConfig& config() const { return config_; }

 private:
  loader::ModelConfig config_;
};

}  // namespace placer::model
