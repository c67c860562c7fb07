// The Llama family (Llama 1-3, Mistral, Qwen2): token embedding; decoder layers of RMSNorm,
// grouped-query attention (q/k/v bias with Qwen2 or attention_bias, o bias with
// attention_bias), SiLU-gated MLP (biases with mlp_bias); final RMSNorm; lm_head, tied to the
// embedding with tie_word_embeddings.
#pragma once

#include <cstddef>

#include "loader/architectures/architecture.h"

namespace placer::loader {

// Slots of a Llama decoder layer, in state_dict order. A bias slot is undefined at run time
// when config.json leaves the bias out.
enum LlamaLayerSlot : std::size_t {
  kLlamaQ, kLlamaQBias, kLlamaK, kLlamaKBias, kLlamaV, kLlamaVBias, kLlamaO, kLlamaOBias,
  kLlamaGate, kLlamaGateBias, kLlamaUp, kLlamaUpBias, kLlamaDown, kLlamaDownBias,
  kLlamaInputNorm, kLlamaPostNorm, kLlamaLayerSlots
};

ArchitectureDescription DescribeLlamaFamily(const ModelConfig& config);

}  // namespace placer::loader
