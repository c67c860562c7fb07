// What every decoder-only architecture shares around its arithmetic: checking the request,
// walking the blocks in order through the placement hooks (which put each block's inputs and
// weights on its execution device), the KV cache on each layer's device, catching libtorch's
// exceptions at the module border, and copying logits out.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "loader/model_config.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"
#include "placement/block_dispatcher.h"

namespace placer::model {

// What flows from block to block during one forward pass.
struct BlockState {
  at::Tensor tokens;  // int64 [T]
  at::Tensor hidden;  // [T, hidden]; the last block leaves logits [T, vocab] here
  int64_t start = 0;  // position of tokens[0]
};

class DecoderOnlyModel : public CausalLm {
 public:
  DecoderOnlyModel(const loader::ModelConfig& config,
                   std::unique_ptr<placement::BlockDispatcher> dispatcher, int64_t first_layer_block)
      : config_(config), dispatcher_(std::move(dispatcher)), first_layer_block_(first_layer_block) {}

  absl::StatusOr<Logits> Forward(const std::vector<int32_t>& token_ids,
                                 bool all_positions) const final;
  absl::StatusOr<std::unique_ptr<SequenceCache>> NewSequence(int64_t capacity) const final;
  absl::StatusOr<Logits> Extend(SequenceCache& sequence,
                                const std::vector<int32_t>& token_ids) const final;
  int64_t vocab_size() const final { return config_.vocab_size; }
  int64_t max_positions() const final { return config_.max_position_embeddings; }

 protected:
  // Block `block`'s arithmetic, with its weights (in BlockSpec order) and `state` on its
  // execution device. Decoder layer l is block first_layer_block + l and appends to `cache`.
  virtual void RunBlock(size_t block, const placement::BlockWeights& weights, BlockState& state,
                        KvCache& cache) const = 0;
  const loader::ModelConfig& config() const { return config_; }
  int64_t layer_of(size_t block) const { return static_cast<int64_t>(block) - first_layer_block_; }

 private:
  absl::Status CheckTokens(const std::vector<int32_t>& token_ids, int64_t room) const;
  absl::StatusOr<Logits> RunChecked(KvCache& cache, const std::vector<int32_t>& token_ids,
                                    bool all_positions) const;
  at::Tensor Run(const at::Tensor& tokens, KvCache& cache) const;

  loader::ModelConfig config_;
  std::unique_ptr<placement::BlockDispatcher> dispatcher_;
  int64_t first_layer_block_;
};

}  // namespace placer::model
