#include "model/tokenizer/bpe_model.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

// Vocabularies of real models stay below a million; the bound keeps a hostile file from
// asking for gigabytes of id tables.
constexpr std::int64_t kMaxTokenId = 1 << 24;
constexpr std::size_t kCacheEntries = 20000;
constexpr std::size_t kCachedPieceBytes = 256;

// Splits a merges entry: "a b" (split at the one space) or ["a", "b"].
absl::StatusOr<std::pair<std::string, std::string>> ParseMerge(const nlohmann::json& entry,
                                                               const std::string& path) {
  if (entry.is_string()) {
    const std::string& text = entry.get_ref<const std::string&>();
    const std::size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      return JsonError(path, "a merge is two tokens separated by one space");
    }
    return std::make_pair(text.substr(0, space), text.substr(space + 1));
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    return std::make_pair(entry[0].get<std::string>(), entry[1].get<std::string>());
  }
  return JsonError(path, "a merge is \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model,
                                                             absl::string_view path) {
  PLACER_ASSIGN_OR_RETURN(auto type, StringField(model, path, "type", "BPE"));
  if (type != "BPE") {
    return JsonError(JoinJsonPath(path, "type"),
                     absl::StrCat("model '", type, "' is not supported (BPE only)"));
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel);
  const std::string vocab_path = JoinJsonPath(path, "vocab");
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return JsonError(vocab_path, "expected an object of token -> id");
  }
  std::int64_t largest = -1;
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() >= kMaxTokenId || (id.is_number_unsigned() && id.get<std::uint64_t>() >= kMaxTokenId)) {
      return JsonError(JoinJsonPath(vocab_path, token),
                       absl::StrCat("id must be an integer in [0, ", kMaxTokenId, ")"));
    }
    largest = std::max(largest, id.get<std::int64_t>());
  }
  // Ids index a table: a handful of tokens with huge ids would cost gigabytes.
  const auto entries = static_cast<std::int64_t>(vocab->size());
  if (largest >= 2 * entries + 1024) {
    return JsonError(vocab_path, absl::StrCat("ids are too sparse: the largest is ", largest,
                                              " for ", entries, " tokens"));
  }
  bpe->id_to_token_.resize(static_cast<std::size_t>(largest + 1));
  bpe->has_id_.resize(static_cast<std::size_t>(largest + 1), false);
  for (const auto& [token, id] : vocab->items()) {
    const auto index = static_cast<std::int32_t>(id.get<std::int64_t>());
    bpe->vocab_[token] = index;
    // Duplicate ids: keep the first spelling, as a reverse map can hold only one.
    if (!bpe->has_id_[static_cast<std::size_t>(index)]) {
      bpe->id_to_token_[static_cast<std::size_t>(index)] = token;
      bpe->has_id_[static_cast<std::size_t>(index)] = true;
    }
  }

  PLACER_ASSIGN_OR_RETURN(auto merges, ArrayField(model, path, "merges"));
  const std::string merges_path = JoinJsonPath(path, "merges");
  for (std::size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string entry_path = IndexJsonPath(merges_path, rank);
    PLACER_ASSIGN_OR_RETURN(auto pair, ParseMerge((*merges)[rank], entry_path));
    const auto left = bpe->vocab_.find(pair.first);
    const auto right = bpe->vocab_.find(pair.second);
    const auto merged = bpe->vocab_.find(pair.first + pair.second);
    if (left == bpe->vocab_.end() || right == bpe->vocab_.end() || merged == bpe->vocab_.end()) {
      return JsonError(entry_path, absl::StrCat("'", pair.first, "', '", pair.second,
                                                "' or their merge is not in the vocabulary"));
    }
    // A pair listed twice keeps its first (lowest) rank.
    bpe->merges_.emplace(PairKey(left->second, right->second),
                         Merge{static_cast<std::int32_t>(rank), merged->second});
  }

  PLACER_ASSIGN_OR_RETURN(auto unk, StringField(model, path, "unk_token", ""));
  if (!unk.empty()) {
    const auto found = bpe->vocab_.find(unk);
    if (found == bpe->vocab_.end()) {
      return JsonError(JoinJsonPath(path, "unk_token"),
                       absl::StrCat("'", unk, "' is not in the vocabulary"));
    }
    bpe->unk_id_ = found->second;
  }
  auto fuse_unk = BoolField(model, path, "fuse_unk", false);
  auto byte_fallback = BoolField(model, path, "byte_fallback", false);
  auto ignore_merges = BoolField(model, path, "ignore_merges", false);
  auto prefix = StringField(model, path, "continuing_subword_prefix", "");
  auto suffix = StringField(model, path, "end_of_word_suffix", "");
  for (const absl::Status& status : {fuse_unk.status(), byte_fallback.status(),
                                     ignore_merges.status(), prefix.status(), suffix.status()}) {
    if (!status.ok()) return status;
  }
  bpe->fuse_unk_ = *fuse_unk;
  bpe->byte_fallback_ = *byte_fallback;
  bpe->ignore_merges_ = *ignore_merges;
  bpe->continuing_subword_prefix_ = *prefix;
  bpe->end_of_word_suffix_ = *suffix;
  for (int b = 0; b < 256; ++b) {
    const auto found = bpe->vocab_.find(absl::StrFormat("<0x%02X>", b));
    bpe->byte_ids_[b] = found == bpe->vocab_.end() ? -1 : found->second;
  }
  return bpe;
}

std::optional<std::int32_t> BpeModel::TokenToId(const std::string& token) const {
  const auto found = vocab_.find(token);
  if (found == vocab_.end()) return std::nullopt;
  return found->second;
}

const std::string* BpeModel::IdToToken(std::int32_t id) const {
  if (id < 0 || id >= id_limit() || !has_id_[static_cast<std::size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<std::size_t>(id)];
}

void BpeModel::Encode(const std::string& piece, std::vector<std::int32_t>* ids) const {
  if (piece.empty()) return;
  const bool cacheable = piece.size() <= kCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto found = cache_.find(piece);
    if (found != cache_.end()) {
      ids->insert(ids->end(), found->second.begin(), found->second.end());
      return;
    }
  }
  std::vector<std::int32_t> encoded = EncodeUncached(piece);
  ids->insert(ids->end(), encoded.begin(), encoded.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(piece, std::move(encoded));
  }
}

std::vector<std::int32_t> BpeModel::EncodeUncached(const std::string& piece) const {
  if (ignore_merges_) {
    const auto whole = vocab_.find(piece);
    if (whole != vocab_.end()) return {whole->second};
  }
  std::vector<std::int32_t> symbols = InitialSymbols(piece);
  ApplyMerges(&symbols);
  return symbols;
}

std::vector<std::int32_t> BpeModel::InitialSymbols(const std::string& piece) const {
  const std::vector<std::string> chars = SplitCodePoints(piece);
  std::vector<std::int32_t> symbols;
  bool previous_unk = false;
  for (std::size_t i = 0; i < chars.size(); ++i) {
    std::string symbol = chars[i];
    if (i > 0) symbol.insert(0, continuing_subword_prefix_);
    if (i + 1 == chars.size()) symbol += end_of_word_suffix_;
    const auto found = vocab_.find(symbol);
    if (found != vocab_.end()) {
      symbols.push_back(found->second);
      previous_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (const char c : chars[i]) all_bytes = all_bytes && byte_ids_[static_cast<std::uint8_t>(c)] >= 0;
      if (all_bytes) {
        for (const char c : chars[i]) symbols.push_back(byte_ids_[static_cast<std::uint8_t>(c)]);
        previous_unk = false;
        continue;
      }
    }
    // Without an unk token the character is dropped, as Hugging Face does.
    if (!unk_id_) continue;
    if (!(fuse_unk_ && previous_unk)) symbols.push_back(*unk_id_);
    previous_unk = true;
  }
  return symbols;
}

void BpeModel::ApplyMerges(std::vector<std::int32_t>* symbols) const {
  const std::size_t n = symbols->size();
  if (n < 2) return;
  // A doubly linked list over the symbols; a merged-away symbol gets id -1.
  std::vector<std::int32_t>& id = *symbols;
  std::vector<std::ptrdiff_t> prev(n), next(n);
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<std::ptrdiff_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<std::ptrdiff_t>(i + 1) : -1;
  }
  struct Candidate {
    std::int32_t rank;
    std::size_t left;
    std::int32_t merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](std::ptrdiff_t left) {
    if (left < 0 || next[static_cast<std::size_t>(left)] < 0) return;
    const auto l = static_cast<std::size_t>(left);
    const auto r = static_cast<std::size_t>(next[l]);
    const auto merge = merges_.find(PairKey(id[l], id[r]));
    if (merge != merges_.end()) queue.push({merge->second.rank, l, merge->second.merged_id});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) consider(static_cast<std::ptrdiff_t>(i));
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const std::size_t l = top.left;
    if (id[l] < 0 || next[l] < 0) continue;
    const auto r = static_cast<std::size_t>(next[l]);
    // Stale when either side changed since this candidate was queued.
    const auto merge = merges_.find(PairKey(id[l], id[r]));
    if (merge == merges_.end() || merge->second.rank != top.rank ||
        merge->second.merged_id != top.merged_id) {
      continue;
    }
    id[l] = top.merged_id;
    id[r] = -1;
    next[l] = next[r];
    if (next[r] >= 0) prev[static_cast<std::size_t>(next[r])] = static_cast<std::ptrdiff_t>(l);
    consider(prev[l]);
    consider(static_cast<std::ptrdiff_t>(l));
  }
  std::vector<std::int32_t> merged;
  for (std::ptrdiff_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) {
    merged.push_back(id[static_cast<std::size_t>(i)]);
  }
  *symbols = std::move(merged);
}

}  // namespace placer::tokenizer
