#include "base/json_fields.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer {
namespace {

using nlohmann::json;

absl::Status WrongType(JsonWhere where, absl::string_view expected, const json& value) {
  return JsonError(where, absl::StrCat("expected ", expected, ", got ", value.type_name()));
}

// The field, or an error naming it as missing when the caller gave no fallback.
template <typename T>
absl::StatusOr<const json*> Required(const json& object, JsonWhere where,
                                     absl::string_view key, const std::optional<T>& fallback) {
  PLACER_ASSIGN_OR_RETURN(const json* value, FindJsonField(object, where, key));
  if (value == nullptr && !fallback.has_value()) {
    const std::string path = JoinJsonPath(where.path, key);
    return JsonError({where.file, path}, "missing");
  }
  return value;
}

absl::StatusOr<bool> AsBool(const json& value, JsonWhere where) {
  if (!value.is_boolean()) return WrongType(where, "true or false", value);
  return value.get<bool>();
}

absl::StatusOr<double> AsNumber(const json& value, JsonWhere where) {
  if (!value.is_number()) return WrongType(where, "a number", value);
  return value.get<double>();
}

// The field converted by `convert`, which sees it with its own path; the fallback when absent.
template <typename T, typename Convert>
absl::StatusOr<T> ReadField(const json& object, JsonWhere where, absl::string_view key,
                            std::optional<T> fallback, Convert convert) {
  PLACER_ASSIGN_OR_RETURN(const json* value, Required(object, where, key, fallback));
  if (value == nullptr) return *std::move(fallback);
  const std::string path = JoinJsonPath(where.path, key);
  return convert(*value, JsonWhere{where.file, path});
}

}  // namespace

absl::Status JsonError(JsonWhere where, absl::string_view why) {
  if (where.path.empty()) return absl::InvalidArgumentError(absl::StrCat(where.file, ": ", why));
  return absl::InvalidArgumentError(absl::StrCat(where.file, ": ", where.path, ": ", why));
}

std::string JoinJsonPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string IndexJsonPath(absl::string_view path, std::size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

absl::StatusOr<const json*> FindJsonField(const json& object, JsonWhere where,
                                          absl::string_view key) {
  if (!object.is_object()) return WrongType(where, "an object", object);
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return nullptr;
  return &*found;
}

absl::StatusOr<std::string> JsonAsString(const json& value, JsonWhere where) {
  if (!value.is_string()) return WrongType(where, "a string", value);
  return value.get<std::string>();
}

absl::StatusOr<std::int64_t> JsonAsInt(const json& value, JsonWhere where) {
  if (!value.is_number_integer()) return WrongType(where, "an integer", value);
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    return JsonError(where, "integer out of range");
  }
  return value.get<std::int64_t>();
}

absl::StatusOr<std::string> ReadStringField(const json& object, JsonWhere where,
                                            absl::string_view key,
                                            std::optional<std::string> fallback) {
  return ReadField(object, where, key, std::move(fallback), JsonAsString);
}

absl::StatusOr<bool> ReadBoolField(const json& object, JsonWhere where, absl::string_view key,
                                   std::optional<bool> fallback) {
  return ReadField(object, where, key, fallback, AsBool);
}

absl::StatusOr<std::int64_t> ReadIntField(const json& object, JsonWhere where,
                                          absl::string_view key,
                                          std::optional<std::int64_t> fallback) {
  return ReadField(object, where, key, fallback, JsonAsInt);
}

absl::StatusOr<double> ReadNumberField(const json& object, JsonWhere where,
                                       absl::string_view key, std::optional<double> fallback) {
  return ReadField(object, where, key, fallback, AsNumber);
}

absl::StatusOr<std::optional<std::int64_t>> ReadOptionalIntField(const json& object,
                                                                 JsonWhere where,
                                                                 absl::string_view key) {
  PLACER_ASSIGN_OR_RETURN(const json* value, FindJsonField(object, where, key));
  if (value == nullptr) return std::optional<std::int64_t>();
  const std::string path = JoinJsonPath(where.path, key);
  PLACER_ASSIGN_OR_RETURN(const std::int64_t number, JsonAsInt(*value, {where.file, path}));
  return std::optional<std::int64_t>(number);
}

absl::StatusOr<std::optional<double>> ReadOptionalNumberField(const json& object,
                                                              JsonWhere where,
                                                              absl::string_view key) {
  PLACER_ASSIGN_OR_RETURN(const json* value, FindJsonField(object, where, key));
  if (value == nullptr) return std::optional<double>();
  PLACER_ASSIGN_OR_RETURN(const double number, ReadNumberField(object, where, key));
  return std::optional<double>(number);
}

absl::StatusOr<const json*> ReadArrayField(const json& object, JsonWhere where,
                                           absl::string_view key) {
  PLACER_ASSIGN_OR_RETURN(const json* value,
                          Required(object, where, key, std::optional<bool>()));
  const std::string path = JoinJsonPath(where.path, key);
  if (!value->is_array()) return WrongType({where.file, path}, "an array", *value);
  return value;
}

absl::StatusOr<const json*> ReadObjectField(const json& object, JsonWhere where,
                                            absl::string_view key) {
  PLACER_ASSIGN_OR_RETURN(const json* value,
                          Required(object, where, key, std::optional<bool>()));
  const std::string path = JoinJsonPath(where.path, key);
  if (!value->is_object()) return WrongType({where.file, path}, "an object", *value);
  return value;
}

}  // namespace placer
