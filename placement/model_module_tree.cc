#include "placement/model_module_tree.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/hf_layout.h"

namespace placer::placement {
namespace {

std::string EmbeddingTensor(const loader::ModelConfig& config) {
  return config.is_gpt2() ? "transformer.wte.weight" : "model.embed_tokens.weight";
}

std::string DecoderLayerPrefix(const loader::ModelConfig& config) {
  return config.is_gpt2() ? "transformer.h." : "model.layers.";
}

}  // namespace

std::string DecoderLayerClass(const loader::ModelConfig& config) {
  switch (config.architecture) {
    case loader::Architecture::kLlama:
      return "LlamaDecoderLayer";
    case loader::Architecture::kMistral:
      return "MistralDecoderLayer";
    case loader::Architecture::kQwen2:
      return "Qwen2DecoderLayer";
    case loader::Architecture::kGpt2:
      return "GPT2Block";
  }
  return "DecoderLayer";
}

loader::DType CheckpointDType(const loader::ModelConfig& config,
                              const std::vector<TensorSpec>& checkpoint_tensors) {
  const std::string embedding = EmbeddingTensor(config);
  for (const TensorSpec& tensor : checkpoint_tensors) {
    if (loader::CanonicalTensorName(config, tensor.name) == embedding) return tensor.dtype;
  }
  if (!config.torch_dtype.empty()) {
    absl::StatusOr<loader::DType> dtype = loader::ParseTorchDTypeName(config.torch_dtype);
    if (dtype.ok()) return *dtype;
  }
  return loader::DType::kF32;
}

absl::StatusOr<ModuleTreeSpec> ModuleTreeSpecForModel(
    const loader::ModelConfig& config, const std::vector<TensorSpec>& checkpoint_tensors,
    std::uint64_t kv_bytes_per_layer) {
  const std::vector<loader::ExpectedTensor> expected = loader::ExpectedTensors(config);
  const std::string embedding = EmbeddingTensor(config);
  ModuleTreeSpec spec;

  if (checkpoint_tensors.empty()) {
    const loader::DType dtype = CheckpointDType(config, checkpoint_tensors);
    for (const loader::ExpectedTensor& tensor : expected) {
      spec.tensors.push_back({tensor.name, tensor.shape, dtype, false});
    }
  } else {
    std::map<std::string, const TensorSpec*> by_name;
    for (const TensorSpec& tensor : checkpoint_tensors) {
      const std::string name = loader::CanonicalTensorName(config, tensor.name);
      if (loader::IsKnownNonParameterBuffer(config, name)) continue;
      if (!by_name.emplace(name, &tensor).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint lists tensor '", name, "' twice (with and without its prefix?)"));
      }
    }
    std::set<std::string> used;
    for (const loader::ExpectedTensor& want : expected) {
      auto it = by_name.find(want.name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint lacks tensor '", want.name, "' that ",
            loader::ArchitectureName(config.architecture), " needs"));
      }
      spec.tensors.push_back({want.name, it->second->shape, it->second->dtype, false});
      used.insert(want.name);
    }
    // Tensors the layout does not list (an untied lm_head in a tied model,
    // extra buffers) still take memory; they go last, in name order.
    for (const auto& [name, tensor] : by_name) {
      if (used.count(name) == 0) spec.tensors.push_back({name, tensor->shape, tensor->dtype, false});
    }
  }

  if (config.tie_word_embeddings) {
    bool has_lm_head = false;
    const TensorSpec* embed = nullptr;
    for (const TensorSpec& tensor : spec.tensors) {
      has_lm_head = has_lm_head || tensor.name == "lm_head.weight";
      if (tensor.name == embedding) embed = &tensor;
    }
    if (embed != nullptr) {
      if (!has_lm_head) {
        TensorSpec lm_head = *embed;
        lm_head.name = "lm_head.weight";
        spec.tensors.push_back(lm_head);
      }
      spec.tied.push_back({embedding, "lm_head.weight"});
    }
  }

  // Embeddings are looked up, not staged, when offloaded (BlockSpec::row_lookup); a tied
  // lm_head keeps its group staged.
  for (TensorSpec& tensor : spec.tensors) {
    tensor.row_lookup = tensor.name == embedding || tensor.name == "transformer.wpe.weight";
  }

  const std::string layer_class = DecoderLayerClass(config);
  spec.no_split_classes.push_back(layer_class);
  for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string module = absl::StrCat(DecoderLayerPrefix(config), layer);
    spec.module_classes[module] = layer_class;
    if (kv_bytes_per_layer > 0) spec.kv_cache_bytes[module] = kv_bytes_per_layer;
  }
  return spec;
}

}  // namespace placer::placement
