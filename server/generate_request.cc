#include "server/generate_request.h"

#include "absl/strings/str_cat.h"
#include "model/causal_lm.h"

namespace placer::server {

absl::StatusOr<model::GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                                const ModelSnapshot& model) {
  const bool has_text = !request.prompt().empty();
  const bool has_ids = request.prompt_token_ids_size() > 0;
  if (has_text && has_ids) {
    return absl::InvalidArgumentError("prompt and prompt_token_ids: give one, not both");
  }
  if (!has_text && !has_ids) {
    return absl::InvalidArgumentError("prompt and prompt_token_ids: both empty, give one");
  }
  if (has_text || request.params().stop_size() > 0) {
    const char* field = has_text ? "prompt" : "params.stop";
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": text needs the tokenizer, ",
        model.has_tokenizer ? "which this placerd build cannot run yet"
                            : absl::StrCat("and ", model.path, " has no tokenizer.json"),
        "; send prompt_token_ids and stop_token_ids instead"));
  }

  const v1::SamplingParams& params = request.params();
  model::GenerationRequest out;
  out.prompt.assign(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  const int64_t vocab = model.model->vocab_size();
  for (int i = 0; i < request.prompt_token_ids_size(); ++i) {
    const int32_t id = request.prompt_token_ids(i);
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt_token_ids[", i, "]: ", id,
                                                     " is outside the vocabulary [0, ", vocab, ")"));
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
