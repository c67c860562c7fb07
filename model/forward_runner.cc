#include "model/forward_runner.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"

namespace placer::model {

absl::Status DecoderOnlyModel::CheckTokens(const std::vector<int32_t>& token_ids,
                                           int64_t room) const {
  if (token_ids.empty()) return absl::InvalidArgumentError("token_ids: empty");
  if (static_cast<int64_t>(token_ids.size()) > room) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_ids: ", token_ids.size(), " positions, but only ", room,
                     " fit (the model allows ", config_.max_position_embeddings, ")"));
  }
  for (size_t i = 0; i < token_ids.size(); ++i) {
    if (token_ids[i] < 0 || token_ids[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_ids[", i, "]: ", token_ids[i], " is outside the vocabulary [0, ",
                       config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Logits> DecoderOnlyModel::RunChecked(KvCache& cache,
                                                    const std::vector<int32_t>& token_ids,
                                                    bool all_positions) const {
  if (absl::Status status = CheckTokens(token_ids, cache.capacity() - cache.length());
      !status.ok()) {
    return status;
  }
  try {
    c10::InferenceMode inference;
    const at::Tensor tokens =
        at::tensor(std::vector<int64_t>(token_ids.begin(), token_ids.end()), at::kLong);
    at::Tensor logits = Run(tokens, cache);
    cache.Commit(tokens.size(0));
    if (!all_positions) logits = logits.slice(0, logits.size(0) - 1);
    logits = logits.to(at::kFloat).contiguous();
    Logits out;
    out.shape = {logits.size(0), logits.size(1)};
    const float* data = logits.data_ptr<float>();
    out.values.assign(data, data + logits.numel());
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("forward pass failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("forward pass failed: ", e.what()));
  }
}

at::Tensor DecoderOnlyModel::Run(const at::Tensor& tokens, KvCache& cache) const {
  placement::BlockDispatcher::Pass pass(*dispatcher_);
  BlockState state{tokens, at::Tensor(), cache.length()};
  placement::Device current = placement::Device::Cpu();  // requests arrive in host memory
  for (size_t block = 0; block < dispatcher_->block_count(); ++block) {
    at::Tensor* input = block == 0 ? &state.tokens : &state.hidden;
    const placement::BlockWeights& weights = pass.Enter(block, {input}, &current);
    RunBlock(block, weights, state, cache);
  }
  return dispatcher_->transfer().Move(state.hidden, current, placement::Device::Cpu());
}

absl::StatusOr<std::unique_ptr<SequenceCache>> DecoderOnlyModel::NewSequence(
    int64_t capacity) const {
  if (capacity < 1 || capacity > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sequence of ", capacity, " positions does not fit the model's ",
                     config_.max_position_embeddings));
  }
  try {
    std::vector<KvCache::LayerPlacement> layers;
    for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
      const size_t block = static_cast<size_t>(first_layer_block_ + layer);
      layers.push_back({dispatcher_->torch_device(block),
                        dispatcher_->execution_device(block).Name()});
    }
    return std::make_unique<KvCache>(std::move(layers), config_.num_key_value_heads,
                                     config_.head_dim, capacity, at::kFloat,
                                     &dispatcher_->accounting());
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate the KV cache: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<Logits> DecoderOnlyModel::Forward(const std::vector<int32_t>& token_ids,
                                                 bool all_positions) const {
  if (absl::Status status = CheckTokens(token_ids, config_.max_position_embeddings);
      !status.ok()) {
    return status;
  }
  auto sequence = NewSequence(static_cast<int64_t>(token_ids.size()));
  if (!sequence.ok()) return sequence.status();
  return RunChecked(static_cast<KvCache&>(**sequence), token_ids, all_positions);
}

absl::StatusOr<Logits> DecoderOnlyModel::Extend(SequenceCache& sequence,
                                                const std::vector<int32_t>& token_ids) const {
  return RunChecked(static_cast<KvCache&>(sequence), token_ids, /*all_positions=*/false);
}

}  // namespace placer::model
