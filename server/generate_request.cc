#include "server/generate_request.h"

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
  out.prompt_from_text = has_text;
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
  out.stop_token_ids.assign(params.stop_token_ids().begin(), params.stop_token_ids().end());
  if (!params.ignore_eos()) {
    out.stop_token_ids.insert(out.stop_token_ids.end(), model.generation.eos_token_ids.begin(),
                              model.generation.eos_token_ids.end());
  }
  return out;
}

}  // namespace placer::server
