// What every decoder-only architecture shares around its arithmetic: checking the request,
// turning token ids into a tensor, the KV cache, catching libtorch's exceptions at the module
// border, and copying logits out.
#pragma once

#include <ATen/ATen.h>

#include "loader/model_config.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"

namespace placer::model {

class DecoderOnlyModel : public CausalLm {
 public:
  explicit DecoderOnlyModel(const loader::ModelConfig& config) : config_(config) {}

  absl::StatusOr<Logits> Forward(const std::vector<int32_t>& token_ids,
                                 bool all_positions) const final;
  absl::StatusOr<std::unique_ptr<SequenceCache>> NewSequence(int64_t capacity) const final;
  absl::StatusOr<Logits> Extend(SequenceCache& sequence,
                                const std::vector<int32_t>& token_ids) const final;
  int64_t vocab_size() const final { return config_.vocab_size; }
  int64_t max_positions() const final { return config_.max_position_embeddings; }

 protected:
  // tokens: int64 [T] at positions cache.length() .. +T-1; appends their keys and values to
  // `cache` (without committing). Returns logits [T, vocab].
  virtual at::Tensor Run(const at::Tensor& tokens, KvCache& cache) const = 0;
  const loader::ModelConfig& config() const { return config_; }

 private:
  absl::Status CheckTokens(const std::vector<int32_t>& token_ids, int64_t room) const;
  absl::StatusOr<Logits> RunChecked(KvCache& cache, const std::vector<int32_t>& token_ids,
                                    bool all_positions) const;

  loader::ModelConfig config_;
};

}  // namespace placer::model
