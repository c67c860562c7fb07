#include "model/tokenizer/token_decoder.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/tokenizer/byte_level_alphabet.h"
#include "model/tokenizer/tokenizer_json.h"
#include "model/tokenizer/unicode_text.h"
#include "base/status_macros.h"

namespace placer::tokenizer {

struct TokenDecoder::Step {
  enum class Kind { kByteLevel, kMetaspace, kReplace, kByteFallback, kStrip, kJoinWithSpace };
  Kind kind;
  std::string from;  // Metaspace: the replacement; Replace: the pattern; Strip: the content
  std::string to;    // Replace: the content
  bool strip_first = false;  // Metaspace: drop the replacement in the first token
  int start = 0;             // Strip
  int stop = 0;

  std::string Apply(std::string token, bool first) const {
    switch (kind) {
      case Kind::kByteLevel: {
        // A token with characters outside the alphabet (an added token) stays as written.
        std::optional<std::string> bytes = FromByteLevelAlphabet(token);
        return bytes ? *std::move(bytes) : token;
      }
      case Kind::kMetaspace:
        return absl::StrReplaceAll(token, {{from, first && strip_first ? "" : " "}});
      case Kind::kReplace:
        return from.empty() ? token : absl::StrReplaceAll(token, {{from, to}});
      case Kind::kByteFallback: {
        if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return token;
        int value = 0;
        for (const char c : token.substr(3, 2)) {
          const int digit = (c >= '0' && c <= '9')   ? c - '0'
                            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                     : -1;
          if (digit < 0) return token;
          value = value * 16 + digit;
        }
        return std::string(1, static_cast<char>(value));
      }
      case Kind::kStrip: {
        std::size_t begin = 0;
        for (int i = 0; i < start && token.compare(begin, from.size(), from) == 0; ++i) {
          begin += from.size();
        }
        std::size_t end = token.size();
        for (int i = 0; i < stop && end >= begin + from.size() &&
                        token.compare(end - from.size(), from.size(), from) == 0;
             ++i) {
          end -= from.size();
        }
        return token.substr(begin, end - begin);
      }
      case Kind::kJoinWithSpace:
        return first ? token : " " + token;
    }
    return token;
  }
};

namespace {

using Step = TokenDecoder::Step;
constexpr int kMaxDepth = 16;

// Appends the steps of `value`; `fused` turns true once a Fuse step has been seen, after
// which Strip applies to the whole text instead of to each token.
absl::Status AddSteps(const nlohmann::json& value, absl::string_view path, int depth, bool* fused,
                      std::vector<std::unique_ptr<Step>>* steps, TokenDecoder::TextStrip* strip) {
  if (depth > kMaxDepth) return JsonError(path, "nested too deeply");
  PLACER_ASSIGN_OR_RETURN(auto type, TypeField(value, path));
  auto step = std::make_unique<Step>();
  if (type == "ByteLevel") {
    step->kind = Step::Kind::kByteLevel;
  } else if (type == "Metaspace") {
    step->kind = Step::Kind::kMetaspace;
    PLACER_ASSIGN_OR_RETURN(auto replacement,
                            StringField(value, path, "replacement", "\xE2\x96\x81"));
    if (replacement.empty()) return JsonError(JoinJsonPath(path, "replacement"), "empty");
    PLACER_ASSIGN_OR_RETURN(auto add_prefix_space,
                            BoolField(value, path, "add_prefix_space", true));
    PLACER_ASSIGN_OR_RETURN(auto scheme, StringField(value, path, "prepend_scheme",
                                                     add_prefix_space ? "always" : "never"));
    step->from = std::move(replacement);
    step->strip_first = scheme != "never";
  } else if (type == "Replace") {
    step->kind = Step::Kind::kReplace;
    PLACER_ASSIGN_OR_RETURN(auto pattern, PatternField(value, path, "pattern"));
    if (pattern.is_regex) {
      return JsonError(JoinJsonPath(path, "pattern"), "Replace decoders with a Regex are not supported");
    }
    PLACER_ASSIGN_OR_RETURN(auto content, StringField(value, path, "content"));
    step->from = pattern.text;
    step->to = std::move(content);
  } else if (type == "ByteFallback") {
    step->kind = Step::Kind::kByteFallback;
  } else if (type == "Fuse") {
    *fused = true;
    return absl::OkStatus();
  } else if (type == "Strip") {
    auto content = StringField(value, path, "content", " ");
    auto start = IntField(value, path, "start", 0);
    auto stop = IntField(value, path, "stop", 0);
    for (const absl::Status& status : {content.status(), start.status(), stop.status()}) {
      if (!status.ok()) return status;
    }
    if (content->empty() || SplitCodePoints(*content).size() != 1 || !IsValidUtf8(*content)) {
      return JsonError(JoinJsonPath(path, "content"), "must be one character");
    }
    if (*start < 0 || *stop < 0 || *start > 1024 || *stop > 1024) {
      return JsonError(path, "start and stop must be in [0, 1024]");
    }
    if (*fused) {
      *strip = {*content, static_cast<int>(*start), static_cast<int>(*stop)};
      return absl::OkStatus();
    }
    step->kind = Step::Kind::kStrip;
    step->from = *std::move(content);
    step->start = static_cast<int>(*start);
    step->stop = static_cast<int>(*stop);
  } else if (type == "Sequence") {
    PLACER_ASSIGN_OR_RETURN(auto items, ArrayField(value, path, "decoders"));
    for (std::size_t i = 0; i < items->size(); ++i) {
      absl::Status status = AddSteps((*items)[i], IndexJsonPath(JoinJsonPath(path, "decoders"), i),
                                     depth + 1, fused, steps, strip);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  } else {
    return JsonError(JoinJsonPath(path, "type"),
                     absl::StrCat("decoder '", type,
                                  "' is not supported (supported: ByteLevel, Metaspace, Replace, "
                                  "ByteFallback, Fuse, Strip, Sequence)"));
  }
  // Other steps after Fuse still run token by token: for the per-character steps supported
  // here that gives the same text.
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

}  // namespace

TokenDecoder::TokenDecoder() = default;
TokenDecoder::~TokenDecoder() = default;
TokenDecoder::TokenDecoder(TokenDecoder&&) noexcept = default;
TokenDecoder& TokenDecoder::operator=(TokenDecoder&&) noexcept = default;

absl::StatusOr<TokenDecoder> TokenDecoder::FromJson(const nlohmann::json& value,
                                                    absl::string_view path) {
  TokenDecoder decoder;
  if (value.is_null()) {
    auto join = std::make_unique<Step>();
    join->kind = Step::Kind::kJoinWithSpace;
    decoder.steps_.push_back(std::move(join));
    return decoder;
  }
  bool fused = false;
  absl::Status status = AddSteps(value, path, 0, &fused, &decoder.steps_, &decoder.text_strip_);
  if (!status.ok()) return status;
  return decoder;
}

std::string TokenDecoder::Decode(const std::string& token, bool first) const {
  std::string out = token;
  for (const auto& step : steps_) out = step->Apply(std::move(out), first);
  return out;
}

}  // namespace placer::tokenizer
