#include "model/generation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace placer::model {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "";
}

absl::StatusOr<FinishReason> GenerateTokens(
    const CausalLm& model, const GenerationRequest& request,
    const std::function<bool(const SampledToken&)>& on_token) {
  if (absl::Status status = ValidateSamplingParams(request.sampling, model.vocab_size());
      !status.ok()) {
    return status;
  }
  const int64_t needed =
      static_cast<int64_t>(request.prompt.size()) + static_cast<int64_t>(request.max_new_tokens);
  if (needed > model.max_positions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.max_new_tokens: the prompt (", request.prompt.size(), " tokens) plus ",
        request.max_new_tokens, " new tokens exceed the model's context of ",
        model.max_positions()));
  }
  if (request.max_new_tokens == 0) return FinishReason::kLength;
  auto sequence = model.NewSequence(needed);
  if (!sequence.ok()) return sequence.status();

  Sampler sampler(request.sampling);
  std::vector<int32_t> history = request.prompt;
  std::vector<int32_t> step = request.prompt;
  for (uint32_t generated = 0; generated < request.max_new_tokens; ++generated) {
    auto logits = model.Extend(**sequence, step);
    if (!logits.ok()) return logits.status();
    const SampledToken token = sampler.Next(logits->values, history);
    if (std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), token.id) !=
        request.stop_token_ids.end()) {
      return FinishReason::kStop;
    }
    if (!on_token(token)) return FinishReason::kCancelled;
    history.push_back(token.id);
    step = {token.id};
  }
  return FinishReason::kLength;
}

}  // namespace placer::model
