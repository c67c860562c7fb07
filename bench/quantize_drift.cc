#include "bench/quantize_drift.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "bench/bench_common.h"

namespace placer::bench {
namespace {

// log softmax of one position's logits, in double.
std::vector<double> LogSoftmax(const float* logits, int64_t vocab) {
  const float top = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - top);
  const double log_sum = std::log(sum) + top;
  std::vector<double> out(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) out[static_cast<size_t>(v)] = logits[v] - log_sum;
  return out;
}

}  // namespace

absl::StatusOr<nlohmann::json> MeasureQuantizeDrift(const model::CausalLm& reference,
                                                    const model::CausalLm& quantized, int prompts,
                                                    int tokens) {
  const int64_t vocab = reference.vocab_size();
  if (quantized.vocab_size() != vocab) {
    return absl::InvalidArgumentError(absl::StrCat("drift: the quantized model's vocabulary (",
                                                   quantized.vocab_size(), ") is not the reference's (",
                                                   vocab, ")"));
  }
  int64_t positions = 0, agree = 0;
  double kl_sum = 0, kl_max = 0;
  nlohmann::json per_prompt = nlohmann::json::array();
  for (int p = 0; p < prompts; ++p) {
    const std::vector<int32_t> ids = PromptTokens(tokens, vocab, p);
    PLACER_ASSIGN_OR_RETURN(const model::Logits ref, reference.Forward(ids, true));
    PLACER_ASSIGN_OR_RETURN(const model::Logits got, quantized.Forward(ids, true));
    const auto count = static_cast<int64_t>(ids.size());
    if (ref.values.size() != static_cast<size_t>(count * vocab) || got.values.size() != ref.values.size()) {
      return absl::InternalError(absl::StrCat("drift: Forward returned ", ref.values.size(), " and ",
                                              got.values.size(), " logits for ", count, " positions of ",
                                              vocab));
    }
    int64_t prompt_agree = 0;
    double prompt_kl = 0;
    for (int64_t i = 0; i < count; ++i) {
      const float* a = ref.values.data() + i * vocab;
      const float* b = got.values.data() + i * vocab;
      const std::vector<double> log_p = LogSoftmax(a, vocab), log_q = LogSoftmax(b, vocab);
      double kl = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const double lp = log_p[static_cast<size_t>(v)];
        kl += std::exp(lp) * (lp - log_q[static_cast<size_t>(v)]);
      }
      kl = std::max(kl, 0.0);  // rounding can leave a tiny negative sum for equal distributions
      prompt_kl += kl;
      kl_max = std::max(kl_max, kl);
      prompt_agree += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
    }
    positions += count;
    agree += prompt_agree;
    kl_sum += prompt_kl;
    per_prompt.push_back({{"variant", p},
                          {"top1_agreement", static_cast<double>(prompt_agree) / count},
                          {"mean_kl", prompt_kl / count}});
  }
  return nlohmann::json{{"prompts", prompts},
                        {"tokens_per_prompt", tokens},
                        {"positions", positions},
                        {"top1_agreement", static_cast<double>(agree) / static_cast<double>(positions)},
                        {"mean_kl", kl_sum / static_cast<double>(positions)},
                        {"max_kl", kl_max},
                        {"per_prompt", per_prompt}};
}

}  // namespace placer::bench
