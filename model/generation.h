// A generation request and how it ends; GenerationEngine (generation_engine.h) runs it.
#pragma once

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
  bool prompt_from_text = false;  // the ids came from the tokenizer: errors name "prompt"
};

enum class FinishReason { kLength, kStop, kCancelled };
const char* FinishReasonName(FinishReason reason);

// What a caller answers for each generated token: go on, end here as a stop (a stop string
// matched in the text), or cancel (the client left).
enum class TokenVerdict { kContinue, kStop, kCancel };

// The one check of a request, at the engine's entry: sampling parameters, and the prompt plus
// max_new_tokens within the positions a sequence may have. Errors name the field.
absl::Status ValidateGenerationRequest(const GenerationRequest& request, const CausalLm& model);

}  // namespace placer::model
