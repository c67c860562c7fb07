#include "bench/batched_decode.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "bench/bench_common.h"
#include "model/logit_passes.h"
#include "base/status_macros.h"

namespace placer::bench {
namespace {

int32_t ArgmaxOfRow(const model::Logits& logits, size_t row, int64_t vocab) {
  const float* first = logits.values.data() + static_cast<int64_t>(row) * vocab;
  return static_cast<int32_t>(model::FirstIndexOf(first, vocab, model::LargestLogit(first, vocab)));
}

}  // namespace

absl::StatusOr<nlohmann::json> MeasureBatchedDecode(const model::CausalLm& lm, int batch,
                                                    int prompt_tokens, int new_tokens, int runs) {
  const int64_t vocab = lm.vocab_size();
  nlohmann::json samples = nlohmann::json::array();
  std::vector<double> all_steps;
  for (int run = 0; run <= runs; ++run) {
    const int generate = run == 0 ? std::min(new_tokens, 3) : new_tokens;
    std::vector<std::unique_ptr<model::SequenceCache>> sequences;
    std::vector<model::CausalLm::SequenceStep> steps;
    for (int s = 0; s < batch; ++s) {
      PLACER_ASSIGN_OR_RETURN(auto sequence, lm.NewSequence(prompt_tokens + new_tokens));
      // Other ids per sequence (as placer-bench-grpc's streams): no two rows are the same.
      steps.push_back({sequence.get(), PromptTokens(prompt_tokens, vocab, s)});
      sequences.push_back(std::move(sequence));
    }
    PLACER_ASSIGN_OR_RETURN(model::Logits logits, lm.ExtendBatch(steps));
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(batch));
    for (size_t s = 0; s < tokens.size(); ++s) tokens[s].push_back(ArgmaxOfRow(logits, s, vocab));
    std::vector<double> times;
    for (int i = 1; i < generate; ++i) {
      for (size_t s = 0; s < tokens.size(); ++s) steps[s].token_ids = {tokens[s].back()};
      const Clock::time_point start = Clock::now();
      PLACER_ASSIGN_OR_RETURN(logits, lm.ExtendBatch(steps));
      for (size_t s = 0; s < tokens.size(); ++s) tokens[s].push_back(ArgmaxOfRow(logits, s, vocab));
      times.push_back(Seconds(start, Clock::now()));
    }
    if (run == 0) continue;
    all_steps.insert(all_steps.end(), times.begin(), times.end());
    samples.push_back({{"step_seconds", times}, {"tokens", tokens}});
  }
  nlohmann::json summary = Summary(all_steps);
  return nlohmann::json{{"batch", batch},
                        {"prompt_tokens", prompt_tokens},
                        {"new_tokens", new_tokens},
                        {"step_seconds", summary},
                        {"tokens_per_second", batch / summary["median"].get<double>()},
                        {"runs", samples}};
}

}  // namespace placer::bench
