// Writes a checkpoint directory in the exact Hugging Face layout: config.json
// and generation_config.json as transformers writes them, and the tensors of
// the architecture description (loader/architectures) in model.safetensors, or in model-0000K-of-0000N.safetensors
// shards plus model.safetensors.index.json when they exceed the shard size.
// Tensor values come from a caller-supplied fill, so this stays free of
// libtorch (the fuzz seed maker uses it with constant fills).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "loader/dtype.h"
#include "loader/architectures/architecture.h"
#include "loader/safetensors_writer.h"

namespace placer::loader {

struct CheckpointSpec {
  std::string arch = "llama";  // "llama", "mistral", "qwen2" or "gpt2"
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // llama only; 0 means = heads
  std::int64_t intermediate = 0;  // 0 means 4 * hidden for gpt2
  std::int64_t vocab = 0;
  std::int64_t max_positions = 0;
  DType dtype = DType::kF32;
  bool tie_word_embeddings = false;
  // Llama and Mistral: attention_bias (q, k, v and o biases) and mlp_bias in config.json.
  // Qwen2 always has q/k/v biases; GPT-2 always has all.
  bool attention_bias = false;
  bool mlp_bias = false;
  std::int64_t bos_token_id = 1;
  std::int64_t eos_token_id = 2;
};

// Whether `arch` is one of the Llama family (llama, mistral, qwen2).
bool IsLlamaFamilyArch(absl::string_view arch);

// Presets: "tiny" (~1-5M parameters), "small" (~100M), "medium" (~1B); Llama family also
// "tinyllama" (TinyLlama-1.1B's shape: 22 layers, hidden 2048, 32/4 heads, ffn 5632).
absl::StatusOr<CheckpointSpec> PresetSpec(absl::string_view arch, absl::string_view preset);

// Checks sizes are positive and consistent (heads divide hidden, ...).
absl::Status ValidateSpec(const CheckpointSpec& spec);

nlohmann::ordered_json ConfigJson(const CheckpointSpec& spec);
nlohmann::ordered_json GenerationConfigJson(const CheckpointSpec& spec);

// Produces the fill for one tensor, called in write order.
using TensorFillFactory =
    std::function<SafetensorsWriter::FillFn(const ExpectedTensor& tensor, DType dtype)>;

struct WrittenCheckpoint {
  std::int64_t parameter_count = 0;
  std::uint64_t total_bytes = 0;
  int shard_count = 0;
};

// Creates `dir` if needed and writes config, generation config and weights.
absl::StatusOr<WrittenCheckpoint> WriteCheckpoint(const std::string& dir,
                                                  const CheckpointSpec& spec,
                                                  std::uint64_t max_shard_bytes,
                                                  const TensorFillFactory& make_fill);

}  // namespace placer::loader
