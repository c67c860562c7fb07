#include "model/generation.h"


#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

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

absl::Status ValidateGenerationRequest(const GenerationRequest& request, const CausalLm& model) {
  PLACER_RETURN_IF_ERROR(ValidateSamplingParams(request.sampling, model.vocab_size()));
  if (request.prompt.empty()) {
    return absl::InvalidArgumentError(
        request.prompt_from_text ? "prompt: the text encodes to no tokens"
                                 : "prompt_token_ids: empty (give a prompt or token ids)");
  }
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const int32_t id = request.prompt[i];
    if (id < 0 || id >= model.vocab_size()) {
      // Text can only get here with a tokenizer whose vocabulary outgrows the model's.
      const std::string field =
          request.prompt_from_text ? "prompt" : absl::StrCat("prompt_token_ids[", i, "]");
      return absl::InvalidArgumentError(absl::StrCat(field, ": token ", id,
                                                     " is outside the model's vocabulary [0, ",
                                                     model.vocab_size(), ")"));
    }
  }
  const int64_t needed =
      static_cast<int64_t>(request.prompt.size()) + static_cast<int64_t>(request.max_new_tokens);
  if (needed > model.max_positions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.max_new_tokens: the prompt (", request.prompt.size(), " tokens) plus ",
        request.max_new_tokens, " new tokens exceed the ", model.max_positions(),
        " positions a sequence may have (the model's context, or --max-seq-len)"));
  }
  return absl::OkStatus();
}

}  // namespace placer::model
