// A Hugging Face checkpoint directory, opened: every tensor's name, shard,
// dtype, shape and byte range is known after Open() has read the headers
// (and only the headers), so placement can plan before any weight is read.
// Tensors are then handed out lazily: each shard is mmapped on first use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "loader/dtype.h"
#include "loader/safetensors_file.h"
#include "loader/model_config.h"
#include "loader/prequantized_tensors.h"

namespace placer::loader {

struct TensorInfo {
  std::string name;         // canonical transformers name
  std::string stored_name;  // as written in the shard (GPT-2 may lack "transformer.")
  int shard = 0;     // index into Checkpoint::shards()
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::int64_t num_elements = 0;
  // Absolute byte range in the shard file: [begin, end).
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  std::uint64_t nbytes() const { return end - begin; }
};

struct ShardInfo {
  std::string path;
  std::uint64_t file_size = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t header_fnv1a64 = 0;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

class Checkpoint {
 public:
  // Reads config.json, every shard header, generation_config.json and the
  // tokenizer files, and checks the tensors against the architecture. Reads
  // no tensor data. Errors name the file (and tensor) and the reason.
  static absl::StatusOr<std::shared_ptr<Checkpoint>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::vector<ShardInfo>& shards() const { return shards_; }
  const TensorInfo* Find(absl::string_view name) const;
  // A pre-quantized checkpoint's decoder-layer linear weight slot ("...q_proj.weight"): the
  // tensors it is repacked from (loader/prequantized_repack.h); nullptr for other names.
  const QuantizedLinearSource* QuantizedLinear(absl::string_view slot) const;
  // A slot the checkpoint can fill: a stored tensor or a quantized linear weight.
  bool HasSlot(absl::string_view name) const {
    return Find(name) != nullptr || QuantizedLinear(name) != nullptr;
  }

  // Elements of all parameters (known non-parameter buffers excluded).
  std::int64_t parameter_count() const { return parameter_count_; }
  // Bytes of all tensor data as stored.
  std::uint64_t total_bytes() const { return total_bytes_; }
  // The floating dtype holding the most bytes: what the weights are stored in.
  DType dtype() const { return dtype_; }

  // Empty object when generation_config.json is absent.
  const nlohmann::json& generation_config() const { return generation_config_; }
  bool has_generation_config() const { return has_generation_config_; }
  // tokenizer.json / tokenizer_config.json, parsed; nullopt when absent.
  const std::optional<nlohmann::json>& tokenizer() const { return tokenizer_; }
  const std::optional<nlohmann::json>& tokenizer_config() const { return tokenizer_config_; }
  bool has_tokenizer() const { return tokenizer_.has_value(); }
  // Replaces both parsed files with empty objects (has_tokenizer() is unchanged): call it once
  // the tokenizer is built from them. A large vocabulary's JSON tree is tens of MiB, and a
  // checkpoint lives as long as the model it serves. tokenizer_config.json's
  // `added_tokens_decoder` is never kept (the added tokens come from tokenizer.json).
  void ReleaseTokenizerFiles();

  // The tensor as stored, on the CPU: a zero-copy view over the mapping.
  absl::StatusOr<at::Tensor> ReadTensor(absl::string_view name) const;

  // When `dtype` is the stored dtype and `device` is the CPU, a zero-copy
  // view over the mapping (which stays mapped while any view lives; the view
  // is read-only memory: writing into it faults, clone() first to modify).
  // Otherwise a fresh tensor on `device`, converted with exactly one copy out
  // of the mapping.
  absl::StatusOr<at::Tensor> ReadTensor(absl::string_view name, at::ScalarType dtype,
                                        at::Device device) const;

  // Shards mapped so far (tests use it to check laziness).
  std::size_t mapped_shard_count() const;

 private:
  Checkpoint() = default;

  std::string dir_;
  ModelConfig config_;
  std::map<std::string, TensorInfo> tensors_;
  QuantizedLinears quantized_;
  std::vector<ShardInfo> shards_;
  std::int64_t parameter_count_ = 0;
  std::uint64_t total_bytes_ = 0;
  DType dtype_ = DType::kF32;
  nlohmann::json generation_config_ = nlohmann::json::object();
  bool has_generation_config_ = false;
  std::optional<nlohmann::json> tokenizer_;
  std::optional<nlohmann::json> tokenizer_config_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;  // parallel to shards_
};

}  // namespace placer::loader
