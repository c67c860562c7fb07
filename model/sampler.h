// Picks the next token from a row of logits: greedy at temperature 0, else temperature,
// top-k, top-p (nucleus) and repetition penalty as transformers applies them, with a
// per-request random stream so a seed reproduces the output.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"

namespace placer::model {

struct SamplingParams {
  float temperature = 0;          // 0: greedy
  uint32_t top_k = 0;             // 0: no cut
  float top_p = 1;                // 1: no cut
  float repetition_penalty = 1;   // 1: none
  uint64_t seed = 0;
  // Fill SampledToken::logprob: a pass of exp over the whole vocabulary per token, which with
  // 8 streams cost ~5 ms of a ~20 ms step on the engine thread, so only when asked.
  bool logprobs = false;
};

// INVALID_ARGUMENT naming the field and its allowed range.
absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

struct SampledToken {
  int32_t id = 0;
  // Log-probability under the model's own distribution (raw logits); 0 unless
  // SamplingParams::logprobs.
  float logprob = 0;
};

class Sampler {
 public:
  // `seed` 0 draws a random seed.
  explicit Sampler(const SamplingParams& params);

  // `previous` are the prompt and generated tokens so far (for the repetition penalty).
  SampledToken Next(const std::vector<float>& logits, const std::vector<int32_t>& previous);

 private:
  SamplingParams params_;
  std::mt19937_64 random_;
};

}  // namespace placer::model
