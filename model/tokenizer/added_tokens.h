// tokenizer.json's "added_tokens": special and user tokens found in the raw text before
// anything else runs, leftmost first and longest among those starting at the same place
// (as Hugging Face's Aho-Corasick matcher does). lstrip / rstrip swallow the white space
// beside a match. Not modelled: single_word, and matching "normalized" tokens after the
// normalizer (they are matched in the raw text like the others).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::tokenizer {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// A stretch of input: an added token, or text for the normalizer and the model.
struct Segment {
  absl::string_view text;
  std::optional<std::int32_t> added_id;
  bool at_text_start = false;
};

class AddedTokens {
 public:
  // `value` is the "added_tokens" array (null or absent: none).
  static absl::StatusOr<AddedTokens> FromJson(const nlohmann::json& value, absl::string_view path);

  // Cuts well-formed `text` into segments (views into `text`).
  std::vector<Segment> Split(absl::string_view text) const;

  const AddedToken* FindById(std::int32_t id) const;
  const AddedToken* FindByContent(const std::string& content) const;
  std::int32_t id_limit() const { return id_limit_; }

 private:
  void Insert(std::size_t token_index);
  // The token index of the longest token starting at `at`, or -1.
  std::ptrdiff_t LongestAt(absl::string_view text, std::size_t at) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::int32_t, std::size_t> by_id_;
  std::unordered_map<std::string, std::size_t> by_content_;
  // A byte trie over the contents: node -> (byte -> child); terminal node -> token index.
  std::vector<std::map<unsigned char, std::size_t>> trie_{1};
  std::vector<std::ptrdiff_t> terminal_{-1};
  std::int32_t id_limit_ = 0;
};

}  // namespace placer::tokenizer
