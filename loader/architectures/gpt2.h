// GPT-2: token and position embeddings (separate blocks the planner may put apart); blocks
// of LayerNorm, fused-qkv attention and a GELU MLP, every linear with a bias and stored
// [in, out] (Conv1D); final LayerNorm; lm_head, tied to the token embedding unless
// tie_word_embeddings is false.
#pragma once

#include <cstddef>

#include "loader/architectures/architecture.h"

namespace placer::loader {

// Slots of a GPT-2 block, in state_dict order.
enum Gpt2LayerSlot : std::size_t {
  kGpt2Ln1Weight, kGpt2Ln1Bias, kGpt2AttnWeight, kGpt2AttnBias, kGpt2AttnProjWeight,
  kGpt2AttnProjBias, kGpt2Ln2Weight, kGpt2Ln2Bias, kGpt2FcWeight, kGpt2FcBias,
  kGpt2MlpProjWeight, kGpt2MlpProjBias, kGpt2LayerSlots
};

ArchitectureDescription DescribeGpt2(const ModelConfig& config);

}  // namespace placer::loader
