#include "bench/sampling_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "model/logit_passes.h"
#include "model/sampler.h"

namespace placer::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Median over runs of the microseconds one call of `step` takes, `tokens` calls a run.
double MedianMicroseconds(int tokens, int runs, const std::function<void(int)>& step) {
  std::vector<double> per_call;
  for (int run = 0; run < runs; ++run) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < tokens; ++i) step(i);
    per_call.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                       tokens);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

nlohmann::json MeasureSampling(int64_t vocab, int tokens, int runs) {
  // Logits of a trained model's spread (a few units), a different row every token so no pass
  // sees the same values twice in a row.
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> rows(8, std::vector<float>(static_cast<size_t>(vocab)));
  for (auto& row : rows) {
    for (float& logit : row) logit = normal(random);
  }
  // A near-flat row, as an untrained model's (bench/run's checkpoints): top-p's nucleus then
  // holds most of the vocabulary.
  std::normal_distribution<float> flat_normal(0.0f, 0.3f);
  std::vector<std::vector<float>> flat_rows(8, std::vector<float>(static_cast<size_t>(vocab)));
  for (auto& row : flat_rows) {
    for (float& logit : row) logit = flat_normal(random);
  }
  const std::vector<int32_t> history(64, 5);
  struct Setting {
    const char* name;
    float temperature;
    uint32_t top_k;
    float top_p;
    bool logprobs;
    bool flat = false;
  };
  nlohmann::json sampler = nlohmann::json::object();
  int64_t checksum = 0;
  for (const Setting& setting : {Setting{"greedy", 0, 0, 1, false},
                                 Setting{"temperature_0.7", 0.7f, 0, 1, false},
                                 Setting{"top_k_40", 0.7f, 40, 1, false},
                                 Setting{"top_p_0.9", 0.7f, 0, 0.9f, false},
                                 Setting{"top_k_40_top_p_0.95", 1.0f, 40, 0.95f, false},
                                 Setting{"greedy_logprobs", 0, 0, 1, true},
                                 Setting{"flat_top_p_0.9", 0.7f, 0, 0.9f, false, true}}) {
    model::SamplingParams params;
    params.temperature = setting.temperature;
    params.top_k = setting.top_k;
    params.top_p = setting.top_p;
    params.logprobs = setting.logprobs;
    params.seed = 3;
    model::Sampler picker(params);
    sampler[setting.name] = MedianMicroseconds(tokens, runs, [&](int i) {
      const auto& row_set = setting.flat ? flat_rows : rows;
      checksum += picker.Next(row_set[static_cast<size_t>(i) % row_set.size()], history).id;
    });
  }
  const double max_element = MedianMicroseconds(tokens, runs, [&](int i) {
    const std::vector<float>& row = rows[static_cast<size_t>(i) % rows.size()];
    checksum += std::max_element(row.begin(), row.end()) - row.begin();
  });
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  const double sort = MedianMicroseconds(std::max(1, tokens / 10), runs, [&](int i) {
    const std::vector<float>& row = rows[static_cast<size_t>(i) % rows.size()];
    std::iota(ids.begin(), ids.end(), 0);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    checksum += ids[0];
  });
  return nlohmann::json{{"vocab", vocab},
                        {"tokens", tokens},
                        {"runs", runs},
                        {"vectorized_passes", model::LogitPassesVectorized()},
                        {"sampler_us_per_token", sampler},
                        {"std_max_element_us", max_element},
                        {"std_sort_of_vocabulary_us", sort},
                        {"checksum", checksum}};
}

}  // namespace placer::bench
