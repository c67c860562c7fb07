#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "model/logit_passes.h"

namespace placer::model {
namespace {

// log(sum(exp(values))): from the vectorized passes, or (no finite largest value: infinities,
// every value NaN) the plain formula, whose infinities and NaN are the answer.
float LogSumExp(const std::vector<float>& values, std::vector<float>& scratch) {
  const int64_t n = static_cast<int64_t>(values.size());
  const float largest = LargestLogit(values.data(), n);
  if (!std::isfinite(largest)) {
    double sum = 0;
    for (float value : values) sum += std::exp(static_cast<double>(value - largest));
    return largest + static_cast<float>(std::log(sum));
  }
  scratch.resize(values.size());
  const double sum = SoftmaxWeights(values.data(), n, largest, 1.0f, scratch.data());
  return largest + static_cast<float>(std::log(sum));
}

// Weights in [0, 1] by the top 14 bits of their float32 bits (binade and 5 mantissa bits): the
// bucket order is the weight order. 1.0 is bucket 4064.
constexpr size_t kWeightBuckets = 4096;
size_t BucketOf(float weight) {
  uint32_t bits;
  std::memcpy(&bits, &weight, sizeof(bits));
  return std::min<size_t>(bits >> 18, kWeightBuckets - 1);
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

int32_t Sampler::Pick(const std::vector<int32_t>& candidates, size_t count, double total) {
  // One uniform draw walked through the cumulative weights: token c with probability w_c / total.
  const double point = std::uniform_real_distribution<double>(0.0, 1.0)(random_) * total;
  double cumulative = 0;
  int32_t last = candidates[0];
  for (size_t i = 0; i < count; ++i) {
    const int32_t token = candidates[i];
    const float weight = weights_[static_cast<size_t>(token)];
    if (weight <= 0) continue;
    cumulative += weight;
    last = token;
    if (cumulative > point) return token;
  }
  return last;  // the point fell in the rounding of the last sum
}

int32_t Sampler::Draw(const std::vector<float>& scores, float largest) {
  const float* s = scores.data();
  const int64_t n = static_cast<int64_t>(scores.size());
  const float temperature = params_.temperature;
  // Best first; ties broken by token id so the order is the same on every run; NaN last (as
  // -infinity: the order must stay strict for the sorts).
  auto rank = [s](int32_t token) {
    return std::isnan(s[token]) ? -std::numeric_limits<float>::infinity() : s[token];
  };
  auto better = [&rank](int32_t a, int32_t b) {
    const float ra = rank(a), rb = rank(b);
    return ra != rb ? ra > rb : a < b;
  };
  weights_.resize(scores.size());
  candidates_.clear();
  double total = 0;
  if (params_.top_k > 0 && params_.top_k < n) {
    candidates_.resize(scores.size());
    std::iota(candidates_.begin(), candidates_.end(), 0);
    const auto keep = static_cast<std::ptrdiff_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), better);
    candidates_.resize(static_cast<size_t>(keep));
    for (int32_t token : candidates_) {
      const float weight = std::isnan(s[token]) ? 0.0f : std::exp((s[token] - largest) / temperature);
      weights_[static_cast<size_t>(token)] = weight;
      total += weight;
    }
  } else {
    total = SoftmaxWeights(s, n, largest, temperature, weights_.data());
    if (params_.top_p >= 1) {
      // Every token by its weight, in id order: no order is needed without a nucleus.
      candidates_.resize(scores.size());
      std::iota(candidates_.begin(), candidates_.end(), 0);
      return Pick(candidates_, candidates_.size(), total);
    }
    // The nucleus is a prefix of the best-first order, and weights follow that order: buckets
    // of weight (the top 14 bits of the float: binade and 5 mantissa bits) from the heaviest
    // down; the buckets above the one where their sum reaches top_p are wholly in, in any
    // order, and only that one bucket's tokens are ranked to find where the prefix ends.
    const double target = params_.top_p * total;
    bucket_sums_.assign(kWeightBuckets, 0.0);
    for (int64_t i = 0; i < n; ++i) bucket_sums_[BucketOf(weights_[i])] += weights_[i];
    size_t boundary = 0;
    double above = 0;
    for (size_t b = kWeightBuckets; b-- > 0;) {
      if (b == 0 || above + bucket_sums_[b] >= target) {
        boundary = b;
        break;
      }
      above += bucket_sums_[b];
    }
    ranked_.clear();
    for (int64_t i = 0; i < n; ++i) {
      if (weights_[i] <= 0) continue;
      const size_t bucket = BucketOf(weights_[i]);
      if (bucket > boundary) candidates_.push_back(static_cast<int32_t>(i));
      if (bucket == boundary) ranked_.push_back(static_cast<int32_t>(i));
    }
    std::sort(ranked_.begin(), ranked_.end(), better);
    // The boundary bucket's best-first prefix that reaches top_p (`above` < target: at least
    // its first token).
    double cumulative = above;
    for (size_t i = 0; i < ranked_.size() && cumulative < target; ++i) {
      candidates_.push_back(ranked_[i]);
      cumulative += weights_[static_cast<size_t>(ranked_[i])];
    }
    return Pick(candidates_, candidates_.size(), cumulative);
  }
  size_t keep = candidates_.size();
  if (params_.top_p < 1) {
    // The smallest best-first prefix whose probability reaches top_p (always one token).
    const double target = params_.top_p * total;
    double cumulative = 0;
    size_t nucleus = 0;
    while (nucleus < keep && cumulative < target) {
      cumulative += weights_[static_cast<size_t>(candidates_[nucleus++])];
    }
    keep = std::max<size_t>(nucleus, 1);
    total = cumulative > 0 ? cumulative : weights_[static_cast<size_t>(candidates_[0])];
  }
  return Pick(candidates_, keep, total);
}

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
  const int64_t n = static_cast<int64_t>(scores.size());
  const float largest = LargestLogit(scores.data(), n);
  int32_t chosen = 0;
  if (std::isinf(largest) && largest > 0) {
    // Every temperature puts all the probability on the infinite logits: the first of them.
    chosen = static_cast<int32_t>(FirstIndexOf(scores.data(), n, largest));
  } else if (!std::isfinite(largest)) {
    chosen = 0;  // every logit -infinity or NaN: nothing to prefer
  } else if (params_.temperature == 0) {
    chosen = static_cast<int32_t>(FirstIndexOf(scores.data(), n, largest));
  } else {
    chosen = Draw(scores, largest);
  }
  const float logprob = params_.logprobs
                            ? logits[static_cast<size_t>(chosen)] - LogSumExp(logits, weights_)
                            : 0.0f;
  return SampledToken{chosen, logprob};
}

}  // namespace placer::model
