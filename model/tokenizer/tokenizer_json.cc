#include "model/tokenizer/tokenizer_json.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer::tokenizer {
namespace {

// The field's value, nullptr when absent or null; an error when `object` is no object.
absl::StatusOr<const nlohmann::json*> Field(const nlohmann::json& object, absl::string_view path,
                                            const char* key) {
  if (!object.is_object()) return JsonError(path, "expected an object");
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return nullptr;
  return &*found;
}

absl::Status Missing(absl::string_view path, const char* key) {
  return JsonError(JoinPath(path, key), "missing");
}

}  // namespace

absl::Status JsonError(absl::string_view path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", path, ": ", why));
}

std::string JoinPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string IndexPath(absl::string_view path, std::size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

absl::StatusOr<std::string> StringField(const nlohmann::json& object, absl::string_view path,
                                        const char* key, std::optional<std::string> fallback) {
  PLACER_ASSIGN_OR_RETURN(auto value, Field(object, path, key));
  if (value == nullptr) {
    if (fallback) return *fallback;
    return Missing(path, key);
  }
  if (!value->is_string()) return JsonError(JoinPath(path, key), "expected a string");
  return value->get<std::string>();
}

absl::StatusOr<bool> BoolField(const nlohmann::json& object, absl::string_view path,
                               const char* key, std::optional<bool> fallback) {
  PLACER_ASSIGN_OR_RETURN(auto value, Field(object, path, key));
  if (value == nullptr) {
    if (fallback) return *fallback;
    return Missing(path, key);
  }
  if (!value->is_boolean()) return JsonError(JoinPath(path, key), "expected true or false");
  return value->get<bool>();
}

absl::StatusOr<std::int64_t> IntField(const nlohmann::json& object, absl::string_view path,
                                      const char* key, std::optional<std::int64_t> fallback) {
  PLACER_ASSIGN_OR_RETURN(auto value, Field(object, path, key));
  if (value == nullptr) {
    if (fallback) return *fallback;
    return Missing(path, key);
  }
  if (!value->is_number_integer()) return JsonError(JoinPath(path, key), "expected an integer");
  if (value->is_number_unsigned() &&
      value->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    return JsonError(JoinPath(path, key), "integer out of range");
  }
  return value->get<std::int64_t>();
}

absl::StatusOr<std::string> TypeField(const nlohmann::json& value, absl::string_view path) {
  return StringField(value, path, "type");
}

absl::StatusOr<const nlohmann::json*> ArrayField(const nlohmann::json& object,
                                                 absl::string_view path, const char* key) {
  PLACER_ASSIGN_OR_RETURN(auto value, Field(object, path, key));
  if (value == nullptr) return Missing(path, key);
  if (!value->is_array()) return JsonError(JoinPath(path, key), "expected an array");
  return value;
}

absl::StatusOr<Pattern> PatternField(const nlohmann::json& object, absl::string_view path,
                                     const char* key) {
  PLACER_ASSIGN_OR_RETURN(auto value, Field(object, path, key));
  const std::string field = JoinPath(path, key);
  if (value == nullptr) return Missing(path, key);
  if (value->is_string()) return Pattern{false, value->get<std::string>()};
  for (const bool is_regex : {false, true}) {
    const char* kind = is_regex ? "Regex" : "String";
    PLACER_ASSIGN_OR_RETURN(auto text, Field(*value, field, kind));
    if (text == nullptr) continue;
    if (!text->is_string()) return JsonError(JoinPath(field, kind), "expected a string");
    return Pattern{is_regex, text->get<std::string>()};
  }
  return JsonError(field, "expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace placer::tokenizer
