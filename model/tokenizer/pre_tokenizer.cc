#include "model/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/tokenizer/byte_level_alphabet.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/unicode_regex.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::tokenizer {

const char kGpt2SplitPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

struct Span {
  std::size_t begin;
  std::size_t end;
  bool is_delimiter;
};

Ranges FindLiteral(absl::string_view text, absl::string_view literal) {
  Ranges out;
  if (literal.empty()) return out;
  for (std::size_t at = text.find(literal); at != absl::string_view::npos;
       at = text.find(literal, at + literal.size())) {
    out.emplace_back(at, at + literal.size());
  }
  return out;
}

// A literal or a regex, as Split and Metaspace match it.
class Matcher {
 public:
  Matcher() = default;
  explicit Matcher(std::string literal) : literal_(std::move(literal)) {}
  explicit Matcher(std::shared_ptr<const UnicodeRegex> regex) : regex_(std::move(regex)) {}
  absl::StatusOr<Ranges> Find(absl::string_view text) const {
    if (regex_ != nullptr) return regex_->FindAll(text);
    return FindLiteral(text, literal_);
  }

 private:
  std::string literal_;
  std::shared_ptr<const UnicodeRegex> regex_;
};

absl::Status SplitEach(std::vector<Piece>* pieces, const Matcher& matcher, SplitBehavior behavior,
                       bool invert) {
  std::vector<Piece> out;
  for (const Piece& piece : *pieces) {
    PLACER_ASSIGN_OR_RETURN(auto matches, matcher.Find(piece.text));
    for (Piece& split : SplitAtMatches(piece, matches, behavior, invert)) {
      out.push_back(std::move(split));
    }
  }
  *pieces = std::move(out);
  return absl::OkStatus();
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::shared_ptr<const UnicodeRegex> split)
      : add_prefix_space_(add_prefix_space), split_(std::move(split)) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    if (add_prefix_space_) {
      for (Piece& piece : *pieces) {
        if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(0, " ");
      }
    }
    if (split_ != nullptr) {
      absl::Status status = SplitEach(pieces, Matcher(split_), SplitBehavior::kIsolated, false);
      if (!status.ok()) return status;
    }
    for (Piece& piece : *pieces) piece.text = ToByteLevelAlphabet(piece.text);
    return absl::OkStatus();
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const UnicodeRegex> split_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    for (Piece& piece : *pieces) {
      std::string replaced;
      for (const char c : piece.text) {
        if (c == ' ') {
          replaced += replacement_;
        } else {
          replaced.push_back(c);
        }
      }
      const bool prepend = scheme_ == PrependScheme::kAlways ||
                           (scheme_ == PrependScheme::kFirst && piece.at_text_start);
      if (prepend && replaced.compare(0, replacement_.size(), replacement_) != 0) {
        replaced.insert(0, replacement_);
      }
      piece.text = std::move(replaced);
    }
    if (!split_) return absl::OkStatus();
    return SplitEach(pieces, Matcher(replacement_), SplitBehavior::kMergedWithNext, false);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class Split final : public PreTokenizer {
 public:
  Split(Matcher matcher, SplitBehavior behavior, bool invert)
      : matcher_(std::move(matcher)), behavior_(behavior), invert_(invert) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    return SplitEach(pieces, matcher_, behavior_, invert_);
  }

 private:
  Matcher matcher_;
  SplitBehavior behavior_;
  bool invert_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    for (const auto& step : steps_) {
      absl::Status status = step->Apply(pieces);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& name, absl::string_view path) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return JsonError(path, absl::StrCat("unknown behavior '", name,
                                      "' (Removed, Isolated, MergedWithPrevious, "
                                      "MergedWithNext or Contiguous)"));
}

constexpr int kMaxDepth = 16;

absl::StatusOr<std::unique_ptr<PreTokenizer>> Build(const nlohmann::json& value,
                                                    absl::string_view path, int depth) {
  if (value.is_null()) return nullptr;
  if (depth > kMaxDepth) return JsonError(path, "nested too deeply");
  PLACER_ASSIGN_OR_RETURN(auto type, TypeField(value, path));
  if (type == "ByteLevel") {
    PLACER_ASSIGN_OR_RETURN(auto add_prefix_space,
                            BoolField(value, path, "add_prefix_space", true));
    PLACER_ASSIGN_OR_RETURN(auto use_regex, BoolField(value, path, "use_regex", true));
    std::shared_ptr<const UnicodeRegex> split;
    if (use_regex) {
      PLACER_ASSIGN_OR_RETURN(auto compiled, UnicodeRegex::Compile(kGpt2SplitPattern, path));
      split = std::move(compiled);
    }
    return std::make_unique<ByteLevel>(add_prefix_space, std::move(split));
  }
  if (type == "Metaspace") {
    PLACER_ASSIGN_OR_RETURN(auto replacement,
                            StringField(value, path, "replacement", "\xE2\x96\x81"));
    if (replacement.empty() || SplitCodePoints(replacement).size() != 1 ||
        !IsValidUtf8(replacement)) {
      return JsonError(JoinJsonPath(path, "replacement"), "must be one character");
    }
    // Older files say add_prefix_space; newer ones prepend_scheme.
    PLACER_ASSIGN_OR_RETURN(auto add_prefix_space,
                            BoolField(value, path, "add_prefix_space", true));
    PLACER_ASSIGN_OR_RETURN(auto scheme_name, StringField(value, path, "prepend_scheme",
                                                          add_prefix_space ? "always" : "never"));
    PrependScheme scheme = PrependScheme::kAlways;
    if (scheme_name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (scheme_name == "never") {
      scheme = PrependScheme::kNever;
    } else if (scheme_name != "always") {
      return JsonError(JoinJsonPath(path, "prepend_scheme"), "expected always, first or never");
    }
    PLACER_ASSIGN_OR_RETURN(auto split, BoolField(value, path, "split", true));
    return std::make_unique<Metaspace>(std::move(replacement), scheme, split);
  }
  if (type == "Split") {
    PLACER_ASSIGN_OR_RETURN(auto pattern, PatternField(value, path, "pattern"));
    PLACER_ASSIGN_OR_RETURN(auto behavior_name, StringField(value, path, "behavior"));
    PLACER_ASSIGN_OR_RETURN(auto behavior,
                            ParseBehavior(behavior_name, JoinJsonPath(path, "behavior")));
    PLACER_ASSIGN_OR_RETURN(auto invert, BoolField(value, path, "invert", false));
    if (!IsValidUtf8(pattern.text)) return JsonError(JoinJsonPath(path, "pattern"), "invalid UTF-8");
    Matcher matcher(pattern.text);
    if (pattern.is_regex) {
      PLACER_ASSIGN_OR_RETURN(auto compiled,
                              UnicodeRegex::Compile(pattern.text, JoinJsonPath(path, "pattern")));
      matcher = Matcher(std::move(compiled));
    }
    return std::make_unique<Split>(std::move(matcher), behavior, invert);
  }
  if (type == "Digits") {
    PLACER_ASSIGN_OR_RETURN(auto individual, BoolField(value, path, "individual_digits", false));
    // Rust's char::is_numeric, which Hugging Face uses, is the N categories.
    PLACER_ASSIGN_OR_RETURN(auto compiled,
                            UnicodeRegex::Compile(individual ? "\\p{N}" : "\\p{N}+", path));
    return std::make_unique<Split>(Matcher(std::move(compiled)), SplitBehavior::kIsolated,
                                   false);
  }
  if (type == "Sequence") {
    PLACER_ASSIGN_OR_RETURN(auto items, ArrayField(value, path, "pretokenizers"));
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (std::size_t i = 0; i < items->size(); ++i) {
      PLACER_ASSIGN_OR_RETURN(
          auto step, Build((*items)[i], IndexJsonPath(JoinJsonPath(path, "pretokenizers"), i), depth + 1));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  return JsonError(JoinJsonPath(path, "type"),
                   absl::StrCat("pre-tokenizer '", type,
                                "' is not supported (supported: ByteLevel, Metaspace, Split, "
                                "Digits, Sequence)"));
}

}  // namespace

std::vector<Piece> SplitAtMatches(const Piece& piece, const Ranges& matches,
                                  SplitBehavior behavior, bool invert) {
  // Spans covering the whole piece, each a delimiter (match) or not.
  std::vector<Span> spans;
  std::size_t at = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > at) spans.push_back({at, begin, invert});
    spans.push_back({begin, end, !invert});
    at = end;
  }
  if (at < piece.text.size()) spans.push_back({at, piece.text.size(), invert});

  // Hugging Face's rules (tokenizers/src/tokenizer/normalizer.rs, `split`).
  std::vector<std::pair<std::size_t, std::size_t>> kept;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& span : spans) kept.emplace_back(span.begin, span.end);
      break;
    case SplitBehavior::kRemoved:
      for (const Span& span : spans) {
        if (!span.is_delimiter) kept.emplace_back(span.begin, span.end);
      }
      break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (const Span& span : spans) {
        if (span.is_delimiter == previous && !kept.empty()) {
          kept.back().second = span.end;
        } else {
          kept.emplace_back(span.begin, span.end);
        }
        previous = span.is_delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Span& span : spans) {
        if (span.is_delimiter && !previous && !kept.empty()) {
          kept.back().second = span.end;
        } else {
          kept.emplace_back(span.begin, span.end);
        }
        previous = span.is_delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto span = spans.rbegin(); span != spans.rend(); ++span) {
        if (span->is_delimiter && !previous && !kept.empty()) {
          kept.back().first = span->begin;
        } else {
          kept.emplace_back(span->begin, span->end);
        }
        previous = span->is_delimiter;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  std::vector<Piece> out;
  for (const auto& [begin, end] : kept) {
    if (end == begin) continue;
    out.push_back({piece.text.substr(begin, end - begin), piece.at_text_start && begin == 0});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const nlohmann::json& value,
                                                                   absl::string_view path) {
  return Build(value, path, 0);
}

}  // namespace placer::tokenizer
