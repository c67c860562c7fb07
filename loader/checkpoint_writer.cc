#include "loader/checkpoint_writer.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/file_util.h"
#include "loader/model_config.h"
#include "loader/shard_index.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

// The transformers version whose file layout we reproduce.
constexpr char kTransformersVersion[] = "4.44.0";

}  // namespace

bool IsLlamaFamilyArch(absl::string_view arch) {
  return arch == "llama" || arch == "mistral" || arch == "qwen2";
}

absl::StatusOr<CheckpointSpec> PresetSpec(absl::string_view arch, absl::string_view preset) {
  CheckpointSpec spec;
  spec.arch = std::string(arch);
  if (IsLlamaFamilyArch(arch)) {
    spec.bos_token_id = 1;
    spec.eos_token_id = 2;
    if (preset == "tiny") {
      spec.layers = 4, spec.hidden = 128, spec.heads = 4, spec.kv_heads = 2;
      spec.intermediate = 352, spec.vocab = 2048, spec.max_positions = 512;
    } else if (preset == "small") {
      spec.layers = 8, spec.hidden = 768, spec.heads = 12, spec.kv_heads = 4;
      spec.intermediate = 2048, spec.vocab = 32000, spec.max_positions = 2048;
    } else if (preset == "medium") {
      spec.layers = 20, spec.hidden = 2048, spec.heads = 32, spec.kv_heads = 8;
      spec.intermediate = 5632, spec.vocab = 32000, spec.max_positions = 2048;
    } else if (preset == "tinyllama") {  // TinyLlama-1.1B's shape: the bench's ~1B model
      spec.layers = 22, spec.hidden = 2048, spec.heads = 32, spec.kv_heads = 4;
      spec.intermediate = 5632, spec.vocab = 32000, spec.max_positions = 2048;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown preset \"", preset, "\" (tiny, small, medium, tinyllama)"));
    }
    return spec;
  }
  if (arch == "gpt2") {
    spec.tie_word_embeddings = true;
    spec.bos_token_id = 0;
    spec.eos_token_id = 0;
    if (preset == "tiny") {
      spec.layers = 4, spec.hidden = 128, spec.heads = 4, spec.vocab = 2048;
      spec.max_positions = 256;
    } else if (preset == "small") {
      spec.layers = 12, spec.hidden = 768, spec.heads = 12, spec.vocab = 32000;
      spec.max_positions = 1024;
    } else if (preset == "medium") {
      spec.layers = 34, spec.hidden = 1536, spec.heads = 16, spec.vocab = 32000;
      spec.max_positions = 1024;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown preset \"", preset, "\" (tiny, small, medium)"));
    }
    spec.intermediate = 4 * spec.hidden;
    spec.kv_heads = spec.heads;
    return spec;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown arch \"", arch, "\" (llama, mistral, qwen2, gpt2)"));
}

absl::Status ValidateSpec(const CheckpointSpec& spec) {
  if (!IsLlamaFamilyArch(spec.arch) && spec.arch != "gpt2") {
    return absl::InvalidArgumentError(absl::StrCat("unknown arch \"", spec.arch, "\""));
  }
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"--layers", spec.layers},   {"--hidden", spec.hidden},
      {"--heads", spec.heads},     {"--intermediate", spec.intermediate},
      {"--vocab", spec.vocab},     {"--max-positions", spec.max_positions}};
  for (const auto& [flag, value] : sizes) {
    if (value <= 0) return absl::InvalidArgumentError(absl::StrCat(flag, " must be positive"));
  }
  if (spec.hidden % spec.heads != 0) {
    return absl::InvalidArgumentError("--heads must divide --hidden");
  }
  const std::int64_t kv = spec.kv_heads == 0 ? spec.heads : spec.kv_heads;
  if (kv <= 0 || spec.heads % kv != 0) {
    return absl::InvalidArgumentError("--kv-heads must divide --heads");
  }
  if (spec.arch == "gpt2" && kv != spec.heads) {
    return absl::InvalidArgumentError("gpt2 has no grouped-query attention: --kv-heads must equal --heads");
  }
  if (spec.arch == "gpt2" && (spec.attention_bias || spec.mlp_bias)) {
    return absl::InvalidArgumentError(
        "gpt2 always has its biases: --attention-bias and --mlp-bias are for the Llama family");
  }
  if (spec.arch == "qwen2" && spec.attention_bias) {
    return absl::InvalidArgumentError(
        "qwen2 always has q/k/v biases and never an o_proj bias: --attention-bias does not apply");
  }
  if (!IsFloatingDType(spec.dtype) || !IsComputeDType(spec.dtype)) {
    return absl::InvalidArgumentError("--dtype must be F32, BF16, F16 or F64");
  }
  return absl::OkStatus();
}

nlohmann::ordered_json ConfigJson(const CheckpointSpec& spec) {
  const std::string dtype(TorchDTypeName(spec.dtype));
  nlohmann::ordered_json c;
  if (spec.arch == "gpt2") {
    c["activation_function"] = "gelu_new";
    c["architectures"] = {"GPT2LMHeadModel"};
    c["attn_pdrop"] = 0.1;
    c["bos_token_id"] = spec.bos_token_id;
    c["embd_pdrop"] = 0.1;
    c["eos_token_id"] = spec.eos_token_id;
    c["initializer_range"] = 0.02;
    c["layer_norm_epsilon"] = 1e-05;
    c["model_type"] = "gpt2";
    c["n_ctx"] = spec.max_positions;
    c["n_embd"] = spec.hidden;
    c["n_head"] = spec.heads;
    if (spec.intermediate == 4 * spec.hidden) {
      c["n_inner"] = nullptr;
    } else {
      c["n_inner"] = spec.intermediate;
    }
    c["n_layer"] = spec.layers;
    c["n_positions"] = spec.max_positions;
    c["reorder_and_upcast_attn"] = false;
    c["resid_pdrop"] = 0.1;
    c["scale_attn_by_inverse_layer_idx"] = false;
    c["scale_attn_weights"] = true;
    c["summary_activation"] = nullptr;
    c["summary_first_dropout"] = 0.1;
    c["summary_proj_to_labels"] = true;
    c["summary_type"] = "cls_index";
    c["summary_use_proj"] = true;
    c["tie_word_embeddings"] = spec.tie_word_embeddings;
    c["torch_dtype"] = dtype;
    c["transformers_version"] = kTransformersVersion;
    c["use_cache"] = true;
    c["vocab_size"] = spec.vocab;
    return c;
  }
  if (spec.arch == "mistral") {
    c["architectures"] = {"MistralForCausalLM"};
  } else if (spec.arch == "qwen2") {
    c["architectures"] = {"Qwen2ForCausalLM"};
  } else {
    c["architectures"] = {"LlamaForCausalLM"};
  }
  if (spec.arch != "qwen2") c["attention_bias"] = spec.attention_bias;
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = spec.bos_token_id;
  c["eos_token_id"] = spec.eos_token_id;
  c["head_dim"] = spec.hidden / spec.heads;
  c["hidden_act"] = "silu";
  c["hidden_size"] = spec.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = spec.intermediate;
  c["max_position_embeddings"] = spec.max_positions;
  c["mlp_bias"] = spec.mlp_bias;
  c["model_type"] = spec.arch;
  c["num_attention_heads"] = spec.heads;
  c["num_hidden_layers"] = spec.layers;
  c["num_key_value_heads"] = spec.kv_heads == 0 ? spec.heads : spec.kv_heads;
  c["pretraining_tp"] = 1;
  c["rms_norm_eps"] = 1e-06;
  c["rope_scaling"] = nullptr;
  c["rope_theta"] = 10000.0;
  c["tie_word_embeddings"] = spec.tie_word_embeddings;
  c["torch_dtype"] = dtype;
  c["transformers_version"] = kTransformersVersion;
  c["use_cache"] = true;
  c["vocab_size"] = spec.vocab;
  return c;
}

nlohmann::ordered_json GenerationConfigJson(const CheckpointSpec& spec) {
  nlohmann::ordered_json g;
  g["_from_model_config"] = true;
  g["bos_token_id"] = spec.bos_token_id;
  g["eos_token_id"] = spec.eos_token_id;
  g["transformers_version"] = kTransformersVersion;
  return g;
}

absl::StatusOr<WrittenCheckpoint> WriteCheckpoint(const std::string& dir,
                                                  const CheckpointSpec& spec,
                                                  std::uint64_t max_shard_bytes,
                                                  const TensorFillFactory& make_fill) {
  PLACER_RETURN_IF_ERROR(ValidateSpec(spec));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot create: ", error.message()));
  }
  // Weights left over from an earlier, differently sharded write would make
  // the directory ambiguous (and the loader refuses ambiguity).
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name == kShardIndexFileName ||
        (name.rfind("model", 0) == 0 && entry.path().extension() == ".safetensors")) {
      std::filesystem::remove(entry.path(), error);
    }
  }
  const nlohmann::ordered_json config_json = ConfigJson(spec);
  PLACER_ASSIGN_OR_RETURN(ModelConfig config,
                          ParseModelConfig(config_json.dump(), "generated config.json"));

  // Shards are filled greedily in state_dict order, like save_pretrained.
  std::vector<std::vector<ExpectedTensor>> shards(1);
  std::uint64_t shard_bytes = 0;
  WrittenCheckpoint written;
  for (ExpectedTensor& tensor : ExpectedTensors(config)) {
    std::uint64_t nbytes = DTypeSize(spec.dtype);
    std::int64_t elements = 1;
    for (const std::int64_t dim : tensor.shape) elements *= dim;
    nbytes *= static_cast<std::uint64_t>(elements);
    if (!shards.back().empty() && shard_bytes + nbytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(std::move(tensor));
    shard_bytes += nbytes;
    written.parameter_count += elements;
    written.total_bytes += nbytes;
  }
  written.shard_count = static_cast<int>(shards.size());

  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const std::string file =
        shards.size() == 1 ? std::string(kSingleFileName)
                           : absl::StrFormat("model-%05d-of-%05d.safetensors", k + 1,
                                             shards.size());
    SafetensorsWriter writer(metadata);
    for (const ExpectedTensor& tensor : shards[k]) {
      PLACER_RETURN_IF_ERROR(
          writer.Add(tensor.name, spec.dtype, tensor.shape, make_fill(tensor, spec.dtype)));
      weight_map[tensor.name] = file;
    }
    PLACER_RETURN_IF_ERROR(writer.Write(dir + "/" + file));
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", written.total_bytes}};
    index["weight_map"] = weight_map;
    PLACER_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + std::string(kShardIndexFileName),
                                               index.dump(2) + "\n"));
  }
  PLACER_RETURN_IF_ERROR(WriteFileAtomically(dir + "/config.json", config_json.dump(2) + "\n"));
  PLACER_RETURN_IF_ERROR(WriteFileAtomically(dir + "/generation_config.json",
                                             GenerationConfigJson(spec).dump(2) + "\n"));
  return written;
}

}  // namespace placer::loader
