// Architecture knowledge for building the module tree of a real checkpoint:
// decoder layers (model.layers.N, transformer.h.N) are no-split blocks that
// carry a KV cache; embeddings, final norm and lm_head are modules of their
// own; tied embeddings share one storage (GPT-2's lm_head and wte, Llama
// with tie_word_embeddings) and are placed together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/dtype.h"
#include "loader/model_config.h"
#include "loader/quantized_layout.h"
#include "placement/module_tree.h"

namespace placer::placement {

// "LlamaDecoderLayer", "MistralDecoderLayer", "Qwen2DecoderLayer", "GPT2Block".
std::string DecoderLayerClass(const loader::ModelConfig& config);

// The checkpoint's own dtype: the embedding's when listed, else config.json
// torch_dtype, else F32. Used for sizes when --dtype is not given.
loader::DType CheckpointDType(const loader::ModelConfig& config,
                              const std::vector<TensorSpec>& checkpoint_tensors);

// `checkpoint_tensors` as listed by the safetensors headers (any order,
// GPT-2 names with or without "transformer."); empty means "the tensors the
// architecture has" (loader::ExpectedTensors) in CheckpointDType. Tensors
// come out in execution (state_dict) order; known non-parameter buffers are
// dropped; a tensor the architecture needs but the checkpoint lacks is an
// error naming it. Each decoder layer gets `kv_bytes_per_layer`. Under `quantize` the
// decoder layers' linear weights are sized by their packed bytes (a shape the scheme cannot
// pack is an error naming the tensor); every other tensor keeps its dtype.
absl::StatusOr<ModuleTreeSpec> ModuleTreeSpecForModel(
    const loader::ModelConfig& config, const std::vector<TensorSpec>& checkpoint_tensors,
    std::uint64_t kv_bytes_per_layer, const loader::QuantizeOptions& quantize = {});

}  // namespace placer::placement
