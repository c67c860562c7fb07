// Builds a Hugging Face tokenizer.json for a byte-level BPE tokenizer (the
// GPT-2 / Llama 3 family): 256 byte tokens, merges learned by a small
// deterministic BPE training run over a built-in English paragraph, the
// special tokens, and reserved special tokens to reach exactly vocab_size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace placer::loader {

struct TokenizerFiles {
  nlohmann::ordered_json tokenizer;         // tokenizer.json
  nlohmann::ordered_json tokenizer_config;  // tokenizer_config.json
};

struct TokenizerSpec {
  std::int64_t vocab_size = 0;
  // Ids 0..n-1, in this order; e.g. {"<unk>", "<s>", "</s>"} or {"<|endoftext|>"}.
  std::vector<std::string> special_tokens;
  std::string bos_token;
  std::string eos_token;
  std::string unk_token;  // may be empty
  bool add_bos_token = false;
  std::int64_t model_max_length = 2048;
};

// Fails when vocab_size cannot hold the specials plus the 256 byte tokens.
absl::StatusOr<TokenizerFiles> BuildByteLevelBpeTokenizer(const TokenizerSpec& spec);

}  // namespace placer::loader
