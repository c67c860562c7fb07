#include "loader/architectures/architecture.h"

#include "absl/strings/match.h"
#include "loader/architectures/gpt2.h"
#include "loader/architectures/llama_family.h"

namespace placer::loader {

std::size_t ArchitectureDescription::first_layer_block() const {
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].decoder_layer()) return i;
  }
  return blocks.size();
}

std::vector<const TensorDescription*> ArchitectureDescription::Slots() const {
  std::vector<const TensorDescription*> out;
  for (const BlockDescription& block : blocks) {
    for (const TensorDescription& tensor : block.tensors) out.push_back(&tensor);
  }
  return out;
}

std::vector<const TensorDescription*> ArchitectureDescription::CheckpointTensors() const {
  std::vector<const TensorDescription*> out;
  for (const TensorDescription* tensor : Slots()) {
    if (tensor->present && tensor->tied_to.empty()) out.push_back(tensor);
  }
  return out;
}

std::string ArchitectureDescription::CanonicalName(const std::string& stored_name) const {
  if (droppable_prefix.empty() || absl::StartsWith(stored_name, droppable_prefix)) {
    return stored_name;
  }
  // Names outside the prefixed modules (lm_head) are stored as they are.
  for (const BlockDescription& block : blocks) {
    if (absl::StartsWith(stored_name, block.module + ".")) return stored_name;
  }
  return droppable_prefix + stored_name;
}

bool ArchitectureDescription::IsNonParameterBuffer(const std::string& canonical_name) const {
  for (const std::string& suffix : buffer_suffixes) {
    if (absl::EndsWith(canonical_name, suffix)) return true;
  }
  return false;
}

void MarkTiedLmHeadTable(ArchitectureDescription& architecture) {
  std::string table;
  for (const TensorDescription* slot : architecture.Slots()) {
    if (slot->lm_head && !slot->tied_to.empty()) table = slot->tied_to;
  }
  if (table.empty()) return;
  for (BlockDescription& block : architecture.blocks) {
    for (TensorDescription& slot : block.tensors) {
      if (slot.name == table) slot.tied_lm_head_table = true;
    }
  }
}

ArchitectureDescription DescribeArchitecture(const ModelConfig& config) {
  switch (config.architecture) {
    case Architecture::kGpt2:
      return DescribeGpt2(config);
    case Architecture::kLlama:
    case Architecture::kMistral:
    case Architecture::kQwen2:
      break;
  }
  return DescribeLlamaFamily(config);
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config) {
  const ArchitectureDescription description = DescribeArchitecture(config);
  std::vector<ExpectedTensor> out;
  for (const TensorDescription* tensor : description.CheckpointTensors()) {
    out.push_back({tensor->name, tensor->shape, tensor->init});
  }
  return out;
}

bool IsKnownNonParameterBuffer(const ModelConfig& config, const std::string& name) {
  return DescribeArchitecture(config).IsNonParameterBuffer(name);
}

std::string CanonicalTensorName(const ModelConfig& config, const std::string& name) {
  return DescribeArchitecture(config).CanonicalName(name);
}

}  // namespace placer::loader
