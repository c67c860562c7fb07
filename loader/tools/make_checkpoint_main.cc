// placer-make-checkpoint: writes a deterministic random-weight checkpoint in
// the exact Hugging Face layout, since no real weights can be downloaded in CI.
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "loader/checkpoint_writer.h"
#include "loader/file_util.h"
#include "loader/tools/bpe_tokenizer_builder.h"
#include "loader/random_fill.h"
#include "placement/byte_size.h"

namespace {

using placer::loader::CheckpointSpec;

int Fail(const absl::Status& status) {
  std::cerr << "placer-make-checkpoint: " << status.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a seeded random-weight checkpoint in Hugging Face layout"};
  std::string out;
  std::uint64_t seed = 0;
  std::string arch = "llama";
  std::string preset;
  std::optional<std::int64_t> layers, hidden, heads, kv_heads, intermediate, vocab, max_positions;
  std::string dtype_name = "F32";
  std::string max_shard_size = "2GB";
  std::optional<bool> tie;
  bool no_tokenizer = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  app.add_option("--out", out, "output directory")->required();
  app.add_option("--seed", seed, "random seed (default 0)");
  app.add_option("--arch", arch, "llama, mistral, qwen2 or gpt2")
      ->check(CLI::IsMember({"llama", "mistral", "qwen2", "gpt2"}));
  app.add_option("--preset", preset, "tiny (~1-5M), small (~100M), medium (~1B) or tinyllama (TinyLlama-1.1B's shape) parameters")
      ->check(CLI::IsMember({"tiny", "small", "medium", "tinyllama"}));
  app.add_option("--layers", layers, "decoder layers");
  app.add_option("--hidden", hidden, "hidden size");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--kv-heads", kv_heads, "key/value heads (llama; default = heads)");
  app.add_option("--intermediate", intermediate, "MLP size (gpt2 default 4 x hidden)");
  app.add_option("--vocab", vocab, "vocabulary size");
  app.add_option("--max-positions", max_positions, "max position embeddings (default 2048, gpt2 1024)");
  app.add_option("--dtype", dtype_name, "F32, BF16 or F16")
      ->check(CLI::IsMember({"F32", "BF16", "F16"}));
  app.add_option("--max-shard-size", max_shard_size, "e.g. 2GB (default), 500MB, 10MiB");
  app.add_option("--tie-word-embeddings", tie, "true or false (llama default false, gpt2 true)");
  app.add_flag("--attention-bias", attention_bias,
               "llama, mistral: q, k, v and o_proj biases (config attention_bias)");
  app.add_flag("--mlp-bias", mlp_bias, "llama, mistral, qwen2: MLP biases (config mlp_bias)");
  app.add_flag("--no-tokenizer", no_tokenizer, "omit tokenizer.json and tokenizer_config.json");
  CLI11_PARSE(app, argc, argv);

  CheckpointSpec spec;
  if (!preset.empty()) {
    absl::StatusOr<CheckpointSpec> from_preset = placer::loader::PresetSpec(arch, preset);
    if (!from_preset.ok()) return Fail(from_preset.status());
    spec = *from_preset;
  } else {
    spec.arch = arch;
    spec.max_positions = arch == "gpt2" ? 1024 : 2048;
    spec.tie_word_embeddings = arch == "gpt2";
    spec.bos_token_id = arch == "gpt2" ? 0 : 1;
    spec.eos_token_id = arch == "gpt2" ? 0 : 2;
    if (!layers || !hidden || !heads || !vocab || (arch != "gpt2" && !intermediate)) {
      std::cerr << "placer-make-checkpoint: give --preset, or --layers --hidden --heads "
                   "--vocab (and --intermediate for the Llama family)\n";
      return 2;
    }
  }
  // Explicit sizes override a preset's.
  if (layers) spec.layers = *layers;
  if (hidden) spec.hidden = *hidden;
  if (heads) spec.heads = *heads;
  if (kv_heads) spec.kv_heads = *kv_heads;
  if (vocab) spec.vocab = *vocab;
  if (max_positions) spec.max_positions = *max_positions;
  if (intermediate) {
    spec.intermediate = *intermediate;
  } else if (arch == "gpt2") {
    spec.intermediate = 4 * spec.hidden;
  }
  if (spec.kv_heads == 0) spec.kv_heads = spec.heads;
  if (tie) spec.tie_word_embeddings = *tie;
  spec.attention_bias = attention_bias;
  spec.mlp_bias = mlp_bias;
  absl::StatusOr<placer::loader::DType> dtype = placer::loader::ParseDType(dtype_name);
  if (!dtype.ok()) return Fail(dtype.status());
  spec.dtype = *dtype;
  absl::StatusOr<std::uint64_t> shard_bytes = placer::placement::ParseByteSize(max_shard_size);
  if (!shard_bytes.ok()) return Fail(shard_bytes.status());

  placer::loader::TokenizerSpec tokenizer_spec;
  tokenizer_spec.vocab_size = spec.vocab;
  tokenizer_spec.model_max_length = spec.max_positions;
  if (arch == "gpt2") {
    tokenizer_spec.special_tokens = {"<|endoftext|>"};
    tokenizer_spec.bos_token = tokenizer_spec.eos_token = tokenizer_spec.unk_token = "<|endoftext|>";
  } else {
    tokenizer_spec.special_tokens = {"<unk>", "<s>", "</s>"};
    tokenizer_spec.unk_token = "<unk>";
    tokenizer_spec.bos_token = "<s>";
    tokenizer_spec.eos_token = "</s>";
    tokenizer_spec.add_bos_token = true;
  }
  std::optional<placer::loader::TokenizerFiles> tokenizer;
  if (!no_tokenizer) {
    absl::StatusOr<placer::loader::TokenizerFiles> built =
        placer::loader::BuildByteLevelBpeTokenizer(tokenizer_spec);
    if (!built.ok()) return Fail(built.status());
    tokenizer = *std::move(built);
  }

  absl::StatusOr<placer::loader::WrittenCheckpoint> written = placer::loader::WriteCheckpoint(
      out, spec, *shard_bytes, placer::loader::MakeRandomFill(seed));
  if (!written.ok()) return Fail(written.status());
  if (tokenizer) {
    for (const auto& [name, json] :
         {std::pair<const char*, const nlohmann::ordered_json*>{"tokenizer.json",
                                                                &tokenizer->tokenizer},
          {"tokenizer_config.json", &tokenizer->tokenizer_config}}) {
      absl::Status status =
          placer::loader::WriteFileAtomically(out + "/" + name, json->dump(2) + "\n");
      if (!status.ok()) return Fail(status);
    }
  }
  std::cout << "wrote " << out << ": " << arch << ", " << written->parameter_count
            << " parameters, " << written->total_bytes << " bytes of " << dtype_name << " in "
            << written->shard_count << " shard(s)\n";
  return 0;
}
