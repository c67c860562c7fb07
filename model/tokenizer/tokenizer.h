// A Hugging Face tokenizer.json (with tokenizer_config.json), run natively: added and special
// tokens first, then the normalizer, the pre-tokenizer and BPE; decoding back through the
// decoder. Covers byte-level BPE (GPT-2, Llama 3, Qwen2) and SentencePiece-style BPE (Llama 2,
// Mistral). Immutable once built and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/bpe_model.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/token_decoder.h"

namespace placer::tokenizer {

class Tokenizer {
 public:
  // `tokenizer_config` may be null. Errors name the file, the JSON path and the reason.
  static absl::StatusOr<std::shared_ptr<const Tokenizer>> FromJson(
      const nlohmann::json& tokenizer_json, const nlohmann::json& tokenizer_config);
  // The same from the files' text (what the fuzz target feeds).
  static absl::StatusOr<std::shared_ptr<const Tokenizer>> FromJsonText(
      absl::string_view tokenizer_json, absl::string_view tokenizer_config);

  // INVALID_ARGUMENT when `text` is not UTF-8. Added tokens in the text are always
  // recognised; `add_special_tokens` adds the bos/eos/template tokens around it.
  absl::StatusOr<std::vector<std::int32_t>> Encode(absl::string_view text,
                                                   bool add_special_tokens) const;

  // Well-formed UTF-8 (ill-formed byte runs become U+FFFD). Unknown ids are skipped.
  std::string Decode(absl::Span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  // The token's vocabulary string ("Ġthe", "▁the", "<s>"); nullopt for an unknown id.
  std::optional<std::string> TokenText(std::int32_t id) const;
  // One past the largest id of the vocabulary and the added tokens.
  std::int32_t vocab_size() const { return vocab_size_; }
  std::optional<std::int32_t> bos_id() const { return special_.bos_id; }
  std::optional<std::int32_t> eos_id() const { return special_.eos_id; }
  bool IsSpecial(std::int32_t id) const;

  // For incremental decoding (StreamDecoder): the bytes of one token, `first` when it begins
  // the text; nullopt for an unknown id.
  std::optional<std::string> TokenBytes(std::int32_t id, bool first) const;
  const TokenDecoder::TextStrip& text_strip() const { return decoder_.text_strip(); }

 private:
  Tokenizer() = default;
  absl::Status EncodeSegment(absl::string_view text, bool at_text_start,
                             std::vector<std::int32_t>* ids) const;

  AddedTokens added_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  TokenDecoder decoder_;
  SpecialTokens special_;
  std::int32_t vocab_size_ = 0;
};

// Applies the text-level strip to a whole decoded text (exposed for StreamDecoder).
std::string StripWholeText(std::string text, const TokenDecoder::TextStrip& strip, bool at_start,
                           bool at_end);

}  // namespace placer::tokenizer
