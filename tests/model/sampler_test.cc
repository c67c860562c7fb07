// The sampler's passes over the logits (logit_passes.h) on every path this CPU runs against
// float64, and its draws against the exact distribution: temperature alone, top-k, top-p (whose
// nucleus it finds without sorting the vocabulary) and both, on a small vocabulary counted over
// many draws and on a 32000-token one whose nucleus spans several binades of weight. NaN
// logits are never drawn, infinite ones take all the probability.
#include "model/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "model/logit_passes.h"

namespace placer::model {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> RandomLogits(int64_t n, int seed, float spread) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> logits(static_cast<size_t>(n));
  for (float& logit : logits) logit = normal(random);
  return logits;
}

struct Passes {
  const char* name;
  float (*largest)(const float*, int64_t);
  int64_t (*first_index)(const float*, int64_t, float);
  double (*weights)(const float*, int64_t, float, float, float*);
};

std::vector<Passes> RunnablePasses() {
  std::vector<Passes> passes = {
      {"scalar", LargestLogitScalar, FirstIndexOfScalar, SoftmaxWeightsScalar}};
  if (LogitPassesVectorized()) {
    passes.push_back({"dispatched (AVX-512)", LargestLogit, FirstIndexOf, SoftmaxWeights});
  }
  return passes;
}

TEST(LogitPasses, LargestFirstIndexAndWeightsMatchFloat64OnEveryPath) {
  for (const Passes& pass : RunnablePasses()) {
    for (int64_t n : {1, 15, 16, 17, 33, 1000, 32001}) {
      SCOPED_TRACE(testing::Message() << pass.name << " n " << n);
      std::vector<float> s = RandomLogits(n, static_cast<int>(n), 4.0f);
      if (n > 20) {
        s[3] = std::nanf("");
        s[static_cast<size_t>(n - 2)] = -kInf;
        s[static_cast<size_t>(n / 2)] = 30.0f;  // the largest, also last but one
        s[static_cast<size_t>(n - 1)] = 30.0f;
      }
      float want = -kInf;
      for (float v : s) {
        if (!std::isnan(v)) want = std::max(want, v);
      }
      const float largest = pass.largest(s.data(), n);
      ASSERT_EQ(largest, want);
      const int64_t first = std::find(s.begin(), s.end(), want) - s.begin();
      EXPECT_EQ(pass.first_index(s.data(), n, largest), first);
      EXPECT_EQ(pass.first_index(s.data(), n, 1e30f), n);
      for (float temperature : {0.3f, 1.0f, 5.0f}) {
        std::vector<float> w(static_cast<size_t>(n), -1.0f);
        const double total = pass.weights(s.data(), n, largest, temperature, w.data());
        double want_total = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double argument = (double{s[i]} - largest) / temperature;
          const double exact = std::isnan(s[i]) ? 0.0 : std::exp(argument);
          want_total += exact;
          // The float32 argument's own rounding (|x| 2^-23 of the exponent) plus the exp's.
          const double relative = 4e-7 + (std::isfinite(argument) ? std::abs(argument) * 2.5e-7 : 0.0);
          ASSERT_NEAR(w[i], exact, exact * relative + 1e-38) << "logit " << i << " = " << s[i];
        }
        EXPECT_NEAR(total, want_total, want_total * 1e-6);
      }
    }
  }
}

TEST(LogitPasses, NothingButNaNHasNoLargestAndNoWeight) {
  for (const Passes& pass : RunnablePasses()) {
    SCOPED_TRACE(pass.name);
    const std::vector<float> nans(37, std::nanf(""));
    EXPECT_EQ(pass.largest(nans.data(), 37), -kInf);
    EXPECT_EQ(pass.largest(nans.data(), 0), -kInf);
    std::vector<float> w(37, -1.0f);
    EXPECT_EQ(pass.weights(nans.data(), 37, 0.0f, 1.0f, w.data()), 0.0);
    EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](float v) { return v == 0.0f; }));
  }
}

TEST(Sampler, GreedyTakesTheFirstLargestAndSkipsNaN) {
  Sampler greedy(SamplingParams{});
  std::vector<float> logits = RandomLogits(32000, 3, 2.0f);
  logits[100] = 50.0f;
  logits[20000] = 50.0f;
  logits[7] = std::nanf("");
  logits[0] = std::nanf("");
  EXPECT_EQ(greedy.Next(logits, {}).id, 100);
  logits[31999] = kInf;
  EXPECT_EQ(greedy.Next(logits, {}).id, 31999);
  const std::vector<float> nans(10, std::nanf(""));
  EXPECT_EQ(greedy.Next(nans, {}).id, 0);
}

// The exact probabilities of transformers' order: temperature, top-k, then top-p over the
// best-first order (ties by id), the smallest prefix reaching top_p.
std::map<int32_t, double> ExactDistribution(const std::vector<float>& logits, SamplingParams params) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  if (params.top_k > 0) order.resize(std::min<size_t>(order.size(), params.top_k));
  std::vector<double> weights;
  double total = 0;
  for (int32_t token : order) {
    weights.push_back(std::exp((double{logits[token]} - logits[order[0]]) / params.temperature));
    total += weights.back();
  }
  size_t keep = order.size();
  if (params.top_p < 1) {
    double cumulative = 0;
    keep = 0;
    while (keep < order.size() && cumulative < params.top_p * total) cumulative += weights[keep++];
    total = cumulative;
  }
  std::map<int32_t, double> probability;
  for (size_t i = 0; i < keep; ++i) probability[order[i]] = weights[i] / total;
  return probability;
}

TEST(Sampler, DrawsFollowTheExactDistributionOfEachCut) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.2f, 2.5f, -1.0f, 1.7f, std::nanf(""), 0.9f};
  struct Cut {
    float temperature;
    uint32_t top_k;
    float top_p;
  };
  for (const Cut& cut : {Cut{0.7f, 0, 1}, Cut{1.5f, 0, 1}, Cut{1.0f, 3, 1}, Cut{1.0f, 0, 0.8f},
                         Cut{2.0f, 5, 0.9f}, Cut{1.0f, 0, 0.05f}}) {
    SCOPED_TRACE(testing::Message() << "temperature " << cut.temperature << " top_k " << cut.top_k
                                    << " top_p " << cut.top_p);
    SamplingParams params;
    params.temperature = cut.temperature;
    params.top_k = cut.top_k;
    params.top_p = cut.top_p;
    params.seed = 11;
    std::vector<float> finite = logits;
    finite[6] = -kInf;  // the reference ranks NaN as never drawn
    const std::map<int32_t, double> exact = ExactDistribution(finite, params);
    Sampler sampler(params);
    constexpr int kDraws = 40000;
    std::map<int32_t, int> counts;
    for (int i = 0; i < kDraws; ++i) ++counts[sampler.Next(logits, {}).id];
    for (const auto& [token, count] : counts) {
      ASSERT_TRUE(exact.count(token)) << "token " << token << " drawn outside the cut";
    }
    for (const auto& [token, p] : exact) {
      if (p < 1e-12) continue;
      const double frequency = static_cast<double>(counts[token]) / kDraws;
      EXPECT_NEAR(frequency, p, 5 * std::sqrt(p * (1 - p) / kDraws) + 1e-9) << "token " << token;
    }
  }
}

TEST(Sampler, TheNucleusOfALargeVocabularyIsTheSortedPrefix) {
  // Logits of spread 1.5 at temperature 0.5: the nucleus runs through many binades of weight,
  // and holds a few thousand of the 32000 tokens.
  std::vector<float> logits = RandomLogits(32000, 5, 1.5f);
  SamplingParams params;
  params.temperature = 0.5f;
  params.top_p = 0.9f;
  params.seed = 21;
  const std::map<int32_t, double> exact = ExactDistribution(logits, params);
  ASSERT_GT(exact.size(), 50u);
  ASSERT_LT(exact.size(), 16000u);
  Sampler sampler(params);
  std::set<int32_t> drawn;
  const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  int best_count = 0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t token = sampler.Next(logits, {}).id;
    ASSERT_TRUE(exact.count(token)) << "token " << token << " is outside the nucleus";
    drawn.insert(token);
    best_count += token == best;
  }
  const double p = exact.at(best);
  EXPECT_NEAR(static_cast<double>(best_count) / kDraws, p, 5 * std::sqrt(p * (1 - p) / kDraws));
  EXPECT_GT(drawn.size(), exact.size() / 4) << "draws concentrate on too few tokens";
}

TEST(Sampler, ASeedReproducesDrawsAndInfiniteLogitsTakeAllTheProbability) {
  const std::vector<float> logits = RandomLogits(5000, 9, 1.0f);
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = 0.95f;
  params.seed = 5;
  auto draws = [&](uint64_t seed) {
    params.seed = seed;
    Sampler sampler(params);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(sampler.Next(logits, {}).id);
    return out;
  };
  EXPECT_EQ(draws(5), draws(5));
  EXPECT_NE(draws(5), draws(6));
  std::vector<float> infinite = logits;
  infinite[1234] = kInf;
  infinite[4000] = kInf;
  Sampler sampler(params);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.Next(infinite, {}).id, 1234);
}

}  // namespace
}  // namespace placer::model
