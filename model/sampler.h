// Picks the next token from a row of logits: greedy at temperature 0, else temperature,
// top-k, top-p (nucleus) and repetition penalty as transformers applies them, with a
// per-request random stream so a seed reproduces the output. Each token costs a few vectorized
// passes over the vocabulary (logit_passes.h), never a sort of it: top-k partially sorts k
// tokens, top-p ranks only the tokens of the one bucket of weight where its nucleus ends. NaN logits are never
// drawn; +infinite ones take all the probability (the first of them is chosen).
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
  // A token drawn from `scores` at the temperature, within top_k and top_p; `largest` is their
  // largest (finite) value.
  int32_t Draw(const std::vector<float>& scores, float largest);
  // candidates[0, count) by their weights_ (summing to `total`), one uniform draw.
  int32_t Pick(const std::vector<int32_t>& candidates, size_t count, double total);

  SamplingParams params_;
  std::mt19937_64 random_;
  // Reused from token to token: a weight per vocabulary entry, the tokens being ranked.
  std::vector<float> weights_;
  std::vector<int32_t> candidates_, ranked_;
  std::vector<double> bucket_sums_;
};

}  // namespace placer::model
