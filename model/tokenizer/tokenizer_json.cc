#include "model/tokenizer/tokenizer_json.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

JsonWhere At(absl::string_view path) { return {kTokenizerJson, path}; }

}  // namespace

absl::Status JsonError(absl::string_view path, absl::string_view why) {
  return placer::JsonError(At(path), why);
}

absl::StatusOr<std::string> StringField(const nlohmann::json& object, absl::string_view path,
                                        const char* key, std::optional<std::string> fallback) {
  return ReadStringField(object, At(path), key, std::move(fallback));
}

absl::StatusOr<bool> BoolField(const nlohmann::json& object, absl::string_view path,
                               const char* key, std::optional<bool> fallback) {
  return ReadBoolField(object, At(path), key, fallback);
}

absl::StatusOr<std::int64_t> IntField(const nlohmann::json& object, absl::string_view path,
                                      const char* key, std::optional<std::int64_t> fallback) {
  return ReadIntField(object, At(path), key, fallback);
}

absl::StatusOr<std::string> TypeField(const nlohmann::json& value, absl::string_view path) {
  return StringField(value, path, "type");
}

absl::StatusOr<const nlohmann::json*> ArrayField(const nlohmann::json& object,
                                                 absl::string_view path, const char* key) {
  return ReadArrayField(object, At(path), key);
}

absl::StatusOr<Pattern> PatternField(const nlohmann::json& object, absl::string_view path,
                                     const char* key) {
  PLACER_ASSIGN_OR_RETURN(auto value, FindJsonField(object, At(path), key));
  const std::string field = JoinJsonPath(path, key);
  if (value == nullptr) return JsonError(field, "missing");
  if (value->is_string()) return Pattern{false, value->get<std::string>()};
  for (const bool is_regex : {false, true}) {
    const char* kind = is_regex ? "Regex" : "String";
    PLACER_ASSIGN_OR_RETURN(auto text, FindJsonField(*value, At(field), kind));
    if (text == nullptr) continue;
    const std::string text_path = JoinJsonPath(field, kind);
    PLACER_ASSIGN_OR_RETURN(std::string pattern, JsonAsString(*text, At(text_path)));
    return Pattern{is_regex, std::move(pattern)};
  }
  return JsonError(field, "expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace placer::tokenizer
