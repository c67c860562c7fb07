// Small tokenizer.json files for tests and fuzz seeds: the byte-level BPE tokenizer that
// placer-make-checkpoint writes, and a hand-built SentencePiece-style (Llama 2 / Mistral)
// BPE with byte_fallback, in its two common layouts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace placer::testing {

// What placer-make-checkpoint writes for `arch` ("llama": <unk> <s> </s>, add_bos_token;
// "gpt2": <|endoftext|>), with `vocab_size` tokens.
nlohmann::json MakeCheckpointTokenizerJson(const std::string& arch, int vocab_size);
nlohmann::json MakeCheckpointTokenizerConfig(const std::string& arch, int vocab_size);

enum class SentencePieceLayout {
  kNormalizer,  // Llama 2: Prepend + Replace normalizers, Replace/ByteFallback/Fuse/Strip decoder
  kMetaspace,   // newer files: a Metaspace pre-tokenizer (prepend_scheme "first") and decoder
};
// Vocabulary: <unk> <s> </s>, the 256 <0xNN> tokens, "▁", ASCII letters, digits and some
// punctuation, "é", and merges spelling "▁the", "▁hello", "▁world", "▁and", "ing", "er".
nlohmann::json SentencePieceStyleTokenizerJson(SentencePieceLayout layout);
// add_bos_token true, bos <s>, eos </s>.
nlohmann::json SentencePieceStyleTokenizerConfig();

}  // namespace placer::testing
