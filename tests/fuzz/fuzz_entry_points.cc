#include "tests/fuzz/fuzz_entry_points.h"

#include <string>

#include "loader/architectures/architecture.h"
#include "loader/model_config.h"
#include "loader/prequantized_config.h"
#include "loader/prequantized_tensors.h"
#include "loader/safetensors_header.h"
#include "loader/shard_index.h"

namespace placer::fuzz {
namespace {

absl::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

void Check(bool invariant) {
  if (!invariant) __builtin_trap();
}

void CheckPrequantizedFormat(const loader::PrequantizedFormat& format) {
  Check(format.bits == 4 || format.bits == 8);
  Check(format.group_size >= 0);
  Check(format.bits == 8 || format.group_size % 32 == 0);
  Check(!format.Describe().empty());
}

// A parsed format against the architecture: each linear slot's layout is valid or refused,
// and matching against a checkpoint without the parts is an error, never a crash.
void CheckPrequantizedSlots(const loader::ModelConfig& config) {
  const loader::ArchitectureDescription architecture = loader::DescribeArchitecture(config);
  for (const loader::TensorDescription* slot : architecture.Slots()) {
    if (slot->linear == loader::LinearWeight::kNone) continue;
    absl::StatusOr<const loader::PrequantizedFormat*> format =
        config.quantization->ForModule(loader::ModuleOf(slot->name));
    if (!format.ok()) {
      Check(!format.status().message().empty());
      continue;
    }
    if (*format == nullptr) continue;
    CheckPrequantizedFormat(**format);
    absl::StatusOr<loader::PackedLayout> layout =
        loader::PrequantizedSlotLayout(*slot, **format, "fuzz");
    if (!layout.ok()) continue;
    Check(layout->bytes() > 0 && layout->in % layout->group_size == 0);
  }
  absl::StatusOr<loader::QuantizedLinears> matched = loader::MatchQuantizedLinears(
      architecture, *config.quantization,
      [](const std::string&) -> const loader::StoredTensor* { return nullptr; }, "fuzz");
  Check(!matched.ok() || matched->by_slot.empty());
}

}  // namespace

int FuzzSafetensorsHeader(const std::uint8_t* data, std::size_t size) {
  absl::StatusOr<loader::SafetensorsHeader> header =
      loader::ParseSafetensorsBuffer(AsText(data, size), "fuzz.safetensors");
  if (!header.ok()) {
    Check(!header.status().message().empty());
    return 0;
  }
  Check(header->data_start <= size);
  for (const auto& [name, entry] : header->tensors) {
    Check(!name.empty());
    Check(entry.begin >= header->data_start && entry.begin <= entry.end && entry.end <= size);
    Check(entry.nbytes() == entry.num_elements * loader::DTypeSize(entry.dtype));
    for (const std::int64_t dim : entry.shape) Check(dim >= 0);
  }
  return 0;
}

int FuzzShardIndex(const std::uint8_t* data, std::size_t size) {
  absl::StatusOr<loader::ShardIndex> index =
      loader::ParseShardIndex(AsText(data, size), "fuzz.index.json");
  if (!index.ok()) return 0;
  for (const std::string& file : index->ShardFiles()) {
    Check(file.find('/') == std::string::npos && file != ".." && !file.empty());
  }
  return 0;
}

int FuzzModelConfig(const std::uint8_t* data, std::size_t size) {
  absl::StatusOr<loader::ModelConfig> config =
      loader::ParseModelConfig(AsText(data, size), "fuzz.config.json");
  if (!config.ok()) return 0;
  Check(config->hidden_size > 0 && config->num_attention_heads > 0 &&
        config->num_key_value_heads > 0 && config->head_dim > 0 && config->vocab_size > 0 &&
        config->intermediate_size > 0 && config->num_hidden_layers > 0);
  if (config->num_hidden_layers <= 64) {
    for (const loader::ExpectedTensor& tensor : loader::ExpectedTensors(*config)) {
      for (const std::int64_t dim : tensor.shape) Check(dim > 0);
    }
    if (config->quantization) CheckPrequantizedSlots(*config);
  }
  if (config->quantization) CheckPrequantizedFormat(*config->quantization);
  return 0;
}

int FuzzQuantizeConfig(const std::uint8_t* data, std::size_t size) {
  absl::StatusOr<loader::PrequantizedFormat> format =
      loader::ParseQuantizeConfigFile(AsText(data, size), "fuzz.quantize_config.json");
  if (!format.ok()) {
    Check(!format.status().message().empty());
    return 0;
  }
  CheckPrequantizedFormat(*format);
  return 0;
}

}  // namespace placer::fuzz
