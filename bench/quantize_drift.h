// How far --quantize moves a model's next-token distributions (issue 20): the same fixed
// pseudo-random prompts through the unquantized model and the quantized one, every position's
// distribution compared: top-1 agreement and KL(unquantized || quantized).
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "model/causal_lm.h"

namespace placer::bench {

// `prompts` prompts of `tokens` ids (PromptTokens variants 0..prompts-1), each run once
// through Forward with every position's logits on both models.
absl::StatusOr<nlohmann::json> MeasureQuantizeDrift(const model::CausalLm& reference,
                                                    const model::CausalLm& quantized, int prompts,
                                                    int tokens);

}  // namespace placer::bench
