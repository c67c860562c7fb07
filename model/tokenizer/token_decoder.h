// tokenizer.json's "decoder": turns each token's vocabulary string back into bytes. Supported:
// ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence of those; no decoder
// joins tokens with a space, as Hugging Face does. Every step works token by token, so the
// same code serves whole decodes and streaming; the only cross-token effect, Strip after Fuse
// (Llama 2's "drop the first space of the text"), is reported separately.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::tokenizer {

class TokenDecoder {
 public:
  struct Step;

  static absl::StatusOr<TokenDecoder> FromJson(const nlohmann::json& value,
                                               absl::string_view path);
  TokenDecoder();
  ~TokenDecoder();
  TokenDecoder(TokenDecoder&&) noexcept;
  TokenDecoder& operator=(TokenDecoder&&) noexcept;

  // The bytes of one token; `first` when it begins the decoded text.
  std::string Decode(const std::string& token, bool first) const;

  // Characters dropped from the start and end of the whole text once fused.
  struct TextStrip {
    std::string content;  // one character; empty: nothing is stripped
    int start = 0;
    int stop = 0;
  };
  const TextStrip& text_strip() const { return text_strip_; }

 private:
  std::vector<std::unique_ptr<Step>> steps_;
  TextStrip text_strip_;
};

}  // namespace placer::tokenizer
