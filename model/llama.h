// The Llama family (Llama 1-3, Mistral, Qwen2): RMSNorm, rotary embeddings, grouped-query
// attention with optional q/k/v bias, SiLU-gated MLP, tied or untied lm_head.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/causal_lm.h"

namespace placer::model {

absl::StatusOr<std::unique_ptr<CausalLm>> LoadLlama(
    std::shared_ptr<const loader::Checkpoint> checkpoint, const ModelRuntime& runtime);

}  // namespace placer::model
