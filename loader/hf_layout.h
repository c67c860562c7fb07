// The tensors a Hugging Face checkpoint of a given architecture must hold,
// named exactly as transformers names them, with their shapes. The loader
// checks checkpoints against it and the checkpoint writer writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/model_config.h"

namespace placer::loader {

struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  // Norm weights start at 1 and biases at 0 in a fresh model; the writer
  // uses this, the loader ignores it.
  enum class Init { kNormal, kOnes, kZeros } init = Init::kNormal;
};

// In the order transformers' state_dict() lists them. lm_head.weight is left
// out when the embeddings are tied.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config);

// Buffers some real checkpoints carry that are not parameters (GPT-2's causal
// mask "attn.bias", old Llama "rotary_emb.inv_freq"); tolerated and ignored.
bool IsKnownNonParameterBuffer(const ModelConfig& config, const std::string& name);

// GPT-2 checkpoints on the Hub often drop the "transformer." prefix
// ("h.0.attn.c_attn.weight"); this gives the canonical name.
std::string CanonicalTensorName(const ModelConfig& config, const std::string& name);

}  // namespace placer::loader
