// tokenizer.json's "pre_tokenizer": cuts normalized text into the pieces BPE runs on, one at
// a time. Supported: ByteLevel (GPT-2's split pattern, then the byte-level alphabet), Metaspace
// (SentencePiece's "▁" for spaces), Split (a pattern with Hugging Face's five delimiter
// behaviours), Digits, and Sequence of those.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::tokenizer {

struct Piece {
  std::string text;
  // Starts where the whole input starts (Metaspace's prepend_scheme "first" needs it).
  bool at_text_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual absl::Status Apply(std::vector<Piece>* pieces) const = 0;
};

// nullptr for a null pre-tokenizer.
absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const nlohmann::json& value,
                                                                   absl::string_view path);

// What happens to the delimiters (pattern matches) when a piece is split, as Hugging Face
// defines it; `invert` makes the matches the content and the rest the delimiters.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `piece` at `matches` (sorted, non-overlapping byte ranges); empty pieces are dropped.
std::vector<Piece> SplitAtMatches(const Piece& piece,
                                  const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                                  SplitBehavior behavior, bool invert);

// GPT-2's split pattern, as ByteLevel uses it.
extern const char kGpt2SplitPattern[];

}  // namespace placer::tokenizer
