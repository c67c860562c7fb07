#include "tests/fuzz/fuzz_entry_points.h"

#include <string>

#include "loader/architectures/architecture.h"
#include "loader/model_config.h"
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
  }
  return 0;
}

}  // namespace placer::fuzz
