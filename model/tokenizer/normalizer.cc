#include "model/tokenizer/normalizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/unicode_regex.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

icu::UnicodeString ToIcu(const std::string& text) {
  return icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
}

std::string FromIcu(const icu::UnicodeString& text) {
  std::string out;
  text.toUTF8String(out);
  return out;
}

enum class Form { kNfc, kNfd, kNfkc, kNfkd };

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(Form form) : form_(form) {}
  absl::StatusOr<std::string> Apply(std::string text) const override {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* normalizer = nullptr;
    switch (form_) {
      case Form::kNfc: normalizer = icu::Normalizer2::getNFCInstance(status); break;
      case Form::kNfd: normalizer = icu::Normalizer2::getNFDInstance(status); break;
      case Form::kNfkc: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
      case Form::kNfkd: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
    }
    icu::UnicodeString normalized;
    if (U_SUCCESS(status)) normalized = normalizer->normalize(ToIcu(text), status);
    if (U_FAILURE(status)) {
      return absl::InternalError(absl::StrCat("Unicode normalization failed: ", u_errorName(status)));
    }
    return FromIcu(normalized);
  }

 private:
  Form form_;
};

class Lowercase final : public Normalizer {
 public:
  absl::StatusOr<std::string> Apply(std::string text) const override {
    return FromIcu(ToIcu(text).toLower(icu::Locale::getRoot()));
  }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  absl::StatusOr<std::string> Apply(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::string literal, std::shared_ptr<const UnicodeRegex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  absl::StatusOr<std::string> Apply(std::string text) const override {
    if (regex_ == nullptr) {
      if (literal_.empty()) return text;
      return absl::StrReplaceAll(text, {{literal_, content_}});
    }
    PLACER_ASSIGN_OR_RETURN(auto matches, regex_->FindAll(text));
    std::string out;
    std::size_t copied = 0;
    for (const auto& [begin, end] : matches) {
      out.append(text, copied, begin - copied);
      out += content_;
      copied = end;
    }
    out.append(text, copied, std::string::npos);
    return out;
  }

 private:
  std::string literal_;
  std::shared_ptr<const UnicodeRegex> regex_;
  std::string content_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  absl::StatusOr<std::string> Apply(std::string text) const override {
    if (right_) text.erase(TrailingWhiteSpaceStart(text));
    if (left_) text.erase(0, LeadingWhiteSpaceEnd(text));
    return text;
  }

 private:
  bool left_;
  bool right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  absl::StatusOr<std::string> Apply(std::string text) const override {
    for (const auto& step : steps_) {
      PLACER_ASSIGN_OR_RETURN(auto next, step->Apply(std::move(text)));
      text = std::move(next);
    }
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// A bound on nesting, so a hostile file cannot exhaust the stack.
constexpr int kMaxDepth = 16;

absl::StatusOr<std::unique_ptr<Normalizer>> Build(const nlohmann::json& value,
                                                  absl::string_view path, int depth) {
  if (value.is_null()) return nullptr;
  if (depth > kMaxDepth) return JsonError(path, "nested too deeply");
  PLACER_ASSIGN_OR_RETURN(auto type, TypeField(value, path));
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(Form::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(Form::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(Form::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(Form::kNfkd);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") {
    PLACER_ASSIGN_OR_RETURN(auto prefix, StringField(value, path, "prepend"));
    if (!IsValidUtf8(prefix)) return JsonError(JoinJsonPath(path, "prepend"), "invalid UTF-8");
    return std::make_unique<Prepend>(std::move(prefix));
  }
  if (type == "Replace") {
    PLACER_ASSIGN_OR_RETURN(auto pattern, PatternField(value, path, "pattern"));
    PLACER_ASSIGN_OR_RETURN(auto content, StringField(value, path, "content"));
    if (!IsValidUtf8(content) || !IsValidUtf8(pattern.text)) {
      return JsonError(path, "invalid UTF-8 in pattern or content");
    }
    std::shared_ptr<const UnicodeRegex> regex;
    if (pattern.is_regex) {
      PLACER_ASSIGN_OR_RETURN(auto compiled,
                              UnicodeRegex::Compile(pattern.text, JoinJsonPath(path, "pattern")));
      regex = std::move(compiled);
    }
    return std::make_unique<Replace>(pattern.text, std::move(regex), std::move(content));
  }
  if (type == "Strip") {
    PLACER_ASSIGN_OR_RETURN(auto left, BoolField(value, path, "strip_left", true));
    PLACER_ASSIGN_OR_RETURN(auto right, BoolField(value, path, "strip_right", true));
    return std::make_unique<Strip>(left, right);
  }
  if (type == "Sequence") {
    PLACER_ASSIGN_OR_RETURN(auto items, ArrayField(value, path, "normalizers"));
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (std::size_t i = 0; i < items->size(); ++i) {
      PLACER_ASSIGN_OR_RETURN(
          auto step, Build((*items)[i], IndexJsonPath(JoinJsonPath(path, "normalizers"), i), depth + 1));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  return JsonError(JoinJsonPath(path, "type"),
                   absl::StrCat("normalizer '", type,
                                "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, "
                                "Prepend, Replace, Strip, Sequence)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& value,
                                                               absl::string_view path) {
  return Build(value, path, 0);
}

}  // namespace placer::tokenizer
