#include "server/generate_request.h"

#include "absl/strings/str_cat.h"
#include "model/causal_lm.h"

namespace placer::server {

absl::StatusOr<model::GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                                const ModelSnapshot& model,
                                                                const TextLimits& limits) {
  const bool has_text = !request.prompt().empty();
  const bool has_ids = request.prompt_token_ids_size() > 0;
  if (has_text && has_ids) {
    return absl::InvalidArgumentError("prompt and prompt_token_ids: give one, not both");
  }
  if (!has_text && !has_ids) {
    return absl::InvalidArgumentError("prompt and prompt_token_ids: both empty, give one");
  }
  auto prompt = ResolvePrompt(request, model, limits);
  if (!prompt.ok()) return prompt.status();

  const v1::SamplingParams& params = request.params();
  model::GenerationRequest out;
  out.prompt = *std::move(prompt);
  const int64_t vocab = model.model->vocab_size();
  for (size_t i = 0; i < out.prompt.size(); ++i) {
    const int32_t id = out.prompt[i];
    if (id < 0 || id >= vocab) {
      // Text can only get here with a tokenizer whose vocabulary outgrows the model's.
      const std::string field = has_text ? "prompt" : absl::StrCat("prompt_token_ids[", i, "]");
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": token ", id, " is outside the model's vocabulary [0, ", vocab, ")"));
    }
  }
  out.max_new_tokens =
      params.has_max_new_tokens() ? params.max_new_tokens() : model.generation.max_new_tokens;
  out.sampling = model.generation.sampling;
  if (params.has_temperature()) out.sampling.temperature = params.temperature();
  if (params.has_top_k()) out.sampling.top_k = params.top_k();
  if (params.has_top_p()) out.sampling.top_p = params.top_p();
  if (params.has_repetition_penalty()) {
    out.sampling.repetition_penalty = params.repetition_penalty();
  }
  out.sampling.seed = params.seed();
  out.sampling.logprobs = request.return_logprobs();
  if (absl::Status status = model::ValidateSamplingParams(out.sampling, vocab); !status.ok()) {
    return status;
  }
  out.stop_token_ids.assign(params.stop_token_ids().begin(), params.stop_token_ids().end());
  if (!params.ignore_eos()) {
    out.stop_token_ids.insert(out.stop_token_ids.end(), model.generation.eos_token_ids.begin(),
                              model.generation.eos_token_ids.end());
  }
  return out;
}

}  // namespace placer::server
