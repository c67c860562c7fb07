// The decode loop of one sequence: prefill the prompt into a KV cache, then sample one token
// a step until a stop token, max_new_tokens, or the caller loses interest.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/causal_lm.h"
#include "model/sampler.h"

namespace placer::model {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  uint32_t max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // eos ids included by the caller unless ignored
};

enum class FinishReason { kLength, kStop, kCancelled };
const char* FinishReasonName(FinishReason reason);

// Calls `on_token` for every generated token (a stop token ends generation and is not
// passed on); `on_token` returns false to cancel. Errors name the field at fault.
absl::StatusOr<FinishReason> GenerateTokens(
    const CausalLm& model, const GenerationRequest& request,
    const std::function<bool(const SampledToken&)>& on_token);

}  // namespace placer::model
