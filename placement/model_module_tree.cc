#include "placement/model_module_tree.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/prequantized_tensors.h"
#include "loader/quantized_slots.h"

namespace placer::placement {
namespace {

const std::string& EmbeddingTensor(const loader::ArchitectureDescription& architecture) {
  return architecture.blocks.front().tensors.front().name;
}

}  // namespace

std::string DecoderLayerClass(const loader::ModelConfig& config) {
  const loader::ArchitectureDescription architecture = loader::DescribeArchitecture(config);
  const std::size_t layer = architecture.first_layer_block();
  return layer < architecture.blocks.size() ? architecture.blocks[layer].decoder_layer_class : "";
}

loader::DType CheckpointDType(const loader::ModelConfig& config,
                              const std::vector<TensorSpec>& checkpoint_tensors) {
  const loader::ArchitectureDescription architecture = loader::DescribeArchitecture(config);
  const std::string& embedding = EmbeddingTensor(architecture);
  for (const TensorSpec& tensor : checkpoint_tensors) {
    if (architecture.CanonicalName(tensor.name) == embedding) return tensor.dtype;
  }
  if (!config.torch_dtype.empty()) {
    absl::StatusOr<loader::DType> dtype = loader::ParseTorchDTypeName(config.torch_dtype);
    if (dtype.ok()) return *dtype;
  }
  return loader::DType::kF32;
}

absl::StatusOr<ModuleTreeSpec> ModuleTreeSpecForModel(
    const loader::ModelConfig& config, const std::vector<TensorSpec>& checkpoint_tensors,
    std::uint64_t kv_bytes_per_layer, const loader::QuantizeOptions& quantize) {
  const loader::ArchitectureDescription architecture = loader::DescribeArchitecture(config);
  const loader::DType default_dtype = CheckpointDType(config, checkpoint_tensors);
  std::map<std::string, const loader::TensorDescription*> slots;
  for (const loader::TensorDescription* slot : architecture.Slots()) slots.emplace(slot->name, slot);
  const std::optional<loader::PrequantizedFormat>& prequantized = config.quantization;
  if (prequantized && quantize.enabled()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--quantize ", loader::DescribeQuantizeOptions(quantize), ": the checkpoint is already ",
        "quantized (", prequantized->Describe(), ", from ", prequantized->source,
        "); drop --quantize"));
  }
  if (prequantized && prequantized->quantized_lm_head && quantize.quantizes_lm_head()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--quantize-lm-head: the checkpoint already quantizes its lm_head (", prequantized->source,
        ": lm_head: true); drop --quantize-lm-head"));
  }
  std::set<std::string> quantized_parts;
  if (prequantized && !checkpoint_tensors.empty()) {
    std::map<std::string, loader::StoredTensor> stored;
    for (const TensorSpec& tensor : checkpoint_tensors) {
      stored[architecture.CanonicalName(tensor.name)] = {tensor.dtype, tensor.shape};
    }
    absl::StatusOr<loader::QuantizedLinears> matched = loader::MatchQuantizedLinears(
        architecture, *prequantized,
        [&stored](const std::string& name) -> const loader::StoredTensor* {
          const auto it = stored.find(name);
          return it == stored.end() ? nullptr : &it->second;
        },
        "checkpoint");
    if (!matched.ok()) return matched.status();
    quantized_parts = std::move(matched->parts);
  }
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& tensor : checkpoint_tensors) {
    const std::string name = architecture.CanonicalName(tensor.name);
    if (architecture.IsNonParameterBuffer(name)) continue;
    if (quantized_parts.count(name) > 0) continue;
    const auto slot = slots.find(name);
    if (slot == slots.end() || !slot->second->present) {
      // A quantized part ("...up_proj.qweight") of a linear the config says is left unquantized.
      const std::string module = name.substr(0, name.rfind('.'));
      const auto linear = slots.find(module + ".weight");
      const std::string why_float =
          prequantized && linear != slots.end() && linear->second->linear != loader::LinearWeight::kNone
              ? prequantized->WhyFloat(module)
              : "";
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint holds tensor '", name, "' that ",
          loader::ArchitectureName(config.architecture), " as config.json describes it has not",
          why_float.empty() ? ""
                            : absl::StrCat(": its quantization_config leaves ", module,
                                           " unquantized (", why_float, ")")));
    }
    if (!by_name.emplace(name, &tensor).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint lists tensor '", name, "' twice (with and without its prefix?)"));
    }
  }

  // The tensors in execution order, each with its block's row_lookup; a tied slot takes the
  // shape and dtype of the tensor it reads unless the checkpoint stores it anyway.
  ModuleTreeSpec spec;
  for (const loader::BlockDescription& block : architecture.blocks) {
    for (const loader::TensorDescription& slot : block.tensors) {
      if (!slot.present) continue;
      TensorSpec tensor{slot.name, slot.shape, default_dtype, false, block.row_lookup, std::nullopt};
      absl::StatusOr<const loader::PrequantizedFormat*> stored_format =
          prequantized ? loader::StoredFormat(block, slot, *prequantized)
                       : absl::StatusOr<const loader::PrequantizedFormat*>(nullptr);
      if (!stored_format.ok()) return stored_format.status();
      if (*stored_format != nullptr) {
        // Held repacked: planned in the packed bytes, whatever the parts weigh on disk.
        absl::StatusOr<loader::PackedLayout> layout =
            loader::PrequantizedSlotLayout(slot, **stored_format, "checkpoint");
        if (!layout.ok()) return layout.status();
        tensor.packed_bytes = layout->bytes();
        spec.tensors.push_back(std::move(tensor));
        continue;
      }
      const auto stored = by_name.find(slot.name);
      const auto read = by_name.find(slot.source());
      if (stored != by_name.end()) {
        tensor.shape = stored->second->shape;
        tensor.dtype = stored->second->dtype;
      } else if (!checkpoint_tensors.empty() && slot.tied_to.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint lacks tensor '", slot.name, "' that ",
            loader::ArchitectureName(config.architecture), " needs"));
      } else if (read != by_name.end()) {
        tensor.dtype = read->second->dtype;
      }
      if (const std::optional<loader::QuantizeOptions> packed =
              loader::SlotQuantization(slot, quantize)) {
        if (tensor.shape.size() != 2) {
          return absl::InvalidArgumentError(
              absl::StrCat("--quantize: tensor '", slot.name, "' is not a 2-D weight"));
        }
        const bool in_out = loader::PackedOrientation(slot) == loader::LinearWeight::kInOut;
        absl::StatusOr<loader::PackedLayout> layout = loader::PackedLayoutFor(
            *packed, tensor.shape[in_out ? 1 : 0], tensor.shape[in_out ? 0 : 1], slot.name);
        if (!layout.ok()) return layout.status();
        tensor.packed_bytes = layout->bytes();
      }
      if (!slot.tied_to.empty()) {
        // An offloaded tied lm_head is staged with its group, never looked up.
        tensor.row_lookup = false;
        spec.tied.push_back({slot.tied_to, slot.name});
      }
      spec.tensors.push_back(std::move(tensor));
    }
    if (block.decoder_layer()) {
      spec.module_classes[block.module] = block.decoder_layer_class;
      if (kv_bytes_per_layer > 0) spec.kv_cache_bytes[block.module] = kv_bytes_per_layer;
    }
  }
  spec.no_split_classes.push_back(DecoderLayerClass(config));
  return spec;
}

}  // namespace placer::placement
