// GPT-2: learned positions, LayerNorm, GELU (tanh), Conv1D weights stored [in, out],
// lm_head tied to the token embedding.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "model/causal_lm.h"

namespace placer::model {

absl::StatusOr<std::unique_ptr<CausalLm>> LoadGpt2(
    std::shared_ptr<const loader::Checkpoint> checkpoint, const ModelRuntime& runtime);

}  // namespace placer::model
