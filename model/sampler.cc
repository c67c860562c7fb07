#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "absl/strings/str_cat.h"

namespace placer::model {
namespace {

float LogSumExp(const std::vector<float>& values) {
  const float largest = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (float value : values) sum += std::exp(static_cast<double>(value - largest));
  return largest + static_cast<float>(std::log(sum));
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size) {
  if (!(params.temperature >= 0) || !std::isfinite(params.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.temperature: ", params.temperature, " must be a finite number >= 0"));
  }
  if (!(params.top_p > 0 && params.top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.top_p: ", params.top_p, " must be in (0, 1]"));
  }
  if (params.top_k > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("params.top_k: ", params.top_k,
                                                   " exceeds the vocabulary (", vocab_size, ")"));
  }
  if (!(params.repetition_penalty > 0) || !std::isfinite(params.repetition_penalty)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.repetition_penalty: ", params.repetition_penalty, " must be > 0"));
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), random_(params.seed != 0 ? params.seed : std::random_device{}()) {}

SampledToken Sampler::Next(const std::vector<float>& logits,
                           const std::vector<int32_t>& previous) {
  std::vector<float> penalised;
  if (params_.repetition_penalty != 1) {
    // transformers' RepetitionPenaltyLogitsProcessor: shrink positive, grow negative scores.
    penalised = logits;
    const std::unordered_set<int32_t> seen(previous.begin(), previous.end());
    for (int32_t token : seen) {
      float& score = penalised[static_cast<size_t>(token)];
      score = score > 0 ? score / params_.repetition_penalty : score * params_.repetition_penalty;
    }
  }
  const std::vector<float>& scores = params_.repetition_penalty != 1 ? penalised : logits;
  int32_t chosen = 0;
  if (params_.temperature == 0) {
    chosen = static_cast<int32_t>(std::max_element(scores.begin(), scores.end()) - scores.begin());
  } else {
    std::vector<int32_t> order(scores.size());
    std::iota(order.begin(), order.end(), 0);
    size_t keep = scores.size();
    if (params_.top_k > 0) keep = std::min<size_t>(keep, params_.top_k);
    // Sorted best first; ties broken by token id so the order is the same on every run.
    auto better = [&](int32_t a, int32_t b) {
      return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
    };
    if (params_.top_p < 1) {
      std::sort(order.begin(), order.end(), better);
    } else {
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep),
                        order.end(), better);
    }
    std::vector<double> weights(keep);
    const float best = scores[order[0]];
    double total = 0;
    for (size_t i = 0; i < keep; ++i) {
      weights[i] = std::exp(static_cast<double>(scores[order[i]] - best) / params_.temperature);
      total += weights[i];
    }
    if (params_.top_p < 1) {
      // The smallest prefix whose probability reaches top_p (always at least one token).
      double cumulative = 0;
      size_t nucleus = 0;
      while (nucleus < keep && cumulative < params_.top_p * total) cumulative += weights[nucleus++];
      keep = std::max<size_t>(nucleus, 1);
      weights.resize(keep);
    }
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    chosen = order[pick(random_)];
  }
  const float logprob =
      params_.logprobs ? logits[static_cast<size_t>(chosen)] - LogSumExp(logits) : 0.0f;
  return SampledToken{chosen, logprob};
}

}  // namespace placer::model
