#include "model/tokenizer/added_tokens.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

constexpr std::int64_t kMaxTokenId = 1 << 24;

}  // namespace

absl::StatusOr<AddedTokens> AddedTokens::FromJson(const nlohmann::json& value,
                                                  absl::string_view path) {
  AddedTokens added;
  if (value.is_null()) return added;
  if (!value.is_array()) return JsonError(path, "expected an array");
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = IndexJsonPath(path, i);
    const nlohmann::json& item = value[i];
    PLACER_ASSIGN_OR_RETURN(auto id, IntField(item, item_path, "id"));
    if (id < 0 || id >= kMaxTokenId) {
      return JsonError(JoinJsonPath(item_path, "id"), absl::StrCat("must be in [0, ", kMaxTokenId, ")"));
    }
    PLACER_ASSIGN_OR_RETURN(auto content, StringField(item, item_path, "content"));
    if (content.empty() || !IsValidUtf8(content)) {
      return JsonError(JoinJsonPath(item_path, "content"), "must be non-empty UTF-8");
    }
    auto special = BoolField(item, item_path, "special", false);
    auto lstrip = BoolField(item, item_path, "lstrip", false);
    auto rstrip = BoolField(item, item_path, "rstrip", false);
    for (const absl::Status& status : {special.status(), lstrip.status(), rstrip.status()}) {
      if (!status.ok()) return status;
    }
    AddedToken token{static_cast<std::int32_t>(id), content, *special, *lstrip, *rstrip};
    // A content listed twice keeps its first entry, like the matcher would.
    if (added.by_content_.count(token.content)) continue;
    added.tokens_.push_back(std::move(token));
    added.Insert(added.tokens_.size() - 1);
  }
  return added;
}

void AddedTokens::Insert(std::size_t token_index) {
  const AddedToken& token = tokens_[token_index];
  by_id_.emplace(token.id, token_index);
  by_content_.emplace(token.content, token_index);
  id_limit_ = std::max(id_limit_, token.id + 1);
  std::size_t node = 0;
  for (const char c : token.content) {
    const auto byte = static_cast<unsigned char>(c);
    const auto child = trie_[node].find(byte);
    if (child != trie_[node].end()) {
      node = child->second;
      continue;
    }
    trie_.emplace_back();
    terminal_.push_back(-1);
    trie_[node][byte] = trie_.size() - 1;
    node = trie_.size() - 1;
  }
  terminal_[node] = static_cast<std::ptrdiff_t>(token_index);
}

std::ptrdiff_t AddedTokens::LongestAt(absl::string_view text, std::size_t at) const {
  std::ptrdiff_t longest = -1;
  std::size_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    const auto child = trie_[node].find(static_cast<unsigned char>(text[i]));
    if (child == trie_[node].end()) break;
    node = child->second;
    if (terminal_[node] >= 0) longest = terminal_[node];
  }
  return longest;
}

std::vector<Segment> AddedTokens::Split(absl::string_view text) const {
  std::vector<Segment> segments;
  std::size_t plain_start = 0;  // start of the text not yet emitted
  std::size_t at = 0;
  auto emit_plain = [&](std::size_t end) {
    if (end > plain_start) {
      segments.push_back({text.substr(plain_start, end - plain_start), std::nullopt,
                          plain_start == 0});
    }
  };
  while (at < text.size()) {
    const std::ptrdiff_t found = tokens_.empty() ? -1 : LongestAt(text, at);
    if (found < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<std::size_t>(found)];
    std::size_t begin = at;
    std::size_t end = at + token.content.size();
    if (token.lstrip) {
      begin = plain_start + TrailingWhiteSpaceStart(text.substr(plain_start, at - plain_start));
    }
    if (token.rstrip) end += LeadingWhiteSpaceEnd(text.substr(end));
    emit_plain(begin);
    segments.push_back({text.substr(begin, end - begin), token.id, begin == 0});
    plain_start = at = end;
  }
  emit_plain(text.size());
  return segments;
}

const AddedToken* AddedTokens::FindById(std::int32_t id) const {
  const auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : &tokens_[found->second];
}

const AddedToken* AddedTokens::FindByContent(const std::string& content) const {
  const auto found = by_content_.find(content);
  return found == by_content_.end() ? nullptr : &tokens_[found->second];
}

}  // namespace placer::tokenizer
