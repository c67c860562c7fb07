// The one typed-JSON reader for files that come from outside (config.json, tokenizer.json,
// tokenizer_config.json, *.safetensors.index.json, module-tree dumps). Every error is
// INVALID_ARGUMENT and names the file, the JSON path and why:
//   "tokenizer.json: model.merges[12]: expected a string, got number"
//   "config.json: rope_scaling.factor: must be positive"
// A field that is absent or null takes the caller's fallback; without one it is required
// ("missing"). A field of another type is an error, never a silent default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer {

// Where a JSON value sits: the file it came from and its path inside it ("" = the top).
struct JsonWhere {
  absl::string_view file;
  absl::string_view path;
};

absl::Status JsonError(JsonWhere where, absl::string_view why);
// "a.b" from "a" and "b"; just "b" at the top.
std::string JoinJsonPath(absl::string_view path, absl::string_view key);
// "a[3]".
std::string IndexJsonPath(absl::string_view path, std::size_t index);

// The field's value, or nullptr when absent or null. An error when `object` is not an object.
absl::StatusOr<const nlohmann::json*> FindJsonField(const nlohmann::json& object,
                                                    JsonWhere where, absl::string_view key);

absl::StatusOr<std::string> ReadStringField(const nlohmann::json& object, JsonWhere where,
                                            absl::string_view key,
                                            std::optional<std::string> fallback = std::nullopt);
absl::StatusOr<bool> ReadBoolField(const nlohmann::json& object, JsonWhere where,
                                   absl::string_view key,
                                   std::optional<bool> fallback = std::nullopt);
// A JSON integer that fits int64 (2.0 and "2" are not integers).
absl::StatusOr<std::int64_t> ReadIntField(const nlohmann::json& object, JsonWhere where,
                                          absl::string_view key,
                                          std::optional<std::int64_t> fallback = std::nullopt);
// Any JSON number.
absl::StatusOr<double> ReadNumberField(const nlohmann::json& object, JsonWhere where,
                                       absl::string_view key,
                                       std::optional<double> fallback = std::nullopt);

// nullopt when absent or null; an error when of another type.
absl::StatusOr<std::optional<std::int64_t>> ReadOptionalIntField(const nlohmann::json& object,
                                                                 JsonWhere where,
                                                                 absl::string_view key);
absl::StatusOr<std::optional<double>> ReadOptionalNumberField(const nlohmann::json& object,
                                                              JsonWhere where,
                                                              absl::string_view key);

// Required containers: an error when absent, null or of another type.
absl::StatusOr<const nlohmann::json*> ReadArrayField(const nlohmann::json& object,
                                                     JsonWhere where, absl::string_view key);
absl::StatusOr<const nlohmann::json*> ReadObjectField(const nlohmann::json& object,
                                                      JsonWhere where, absl::string_view key);

// One value (an array element, a map's value) checked for a type.
absl::StatusOr<std::string> JsonAsString(const nlohmann::json& value, JsonWhere where);
absl::StatusOr<std::int64_t> JsonAsInt(const nlohmann::json& value, JsonWhere where);

}  // namespace placer
