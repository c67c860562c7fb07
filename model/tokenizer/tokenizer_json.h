// Reading tokenizer.json: base/json_fields.h's typed fields bound to the file name, so errors
// read "tokenizer.json: model.merges[12]: ...", and the {"String": ..} / {"Regex": ..} patterns
// that normalizers, pre-tokenizers and decoders share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/json_fields.h"

namespace placer::tokenizer {

inline constexpr absl::string_view kTokenizerJson = "tokenizer.json";

absl::Status JsonError(absl::string_view path, absl::string_view why);

// `object` must be a JSON object; the field may be absent or null, then `fallback` is used
// (no fallback: the field is required).
absl::StatusOr<std::string> StringField(const nlohmann::json& object, absl::string_view path,
                                        const char* key,
                                        std::optional<std::string> fallback = std::nullopt);
absl::StatusOr<bool> BoolField(const nlohmann::json& object, absl::string_view path,
                               const char* key, std::optional<bool> fallback = std::nullopt);
absl::StatusOr<std::int64_t> IntField(const nlohmann::json& object, absl::string_view path,
                                      const char* key,
                                      std::optional<std::int64_t> fallback = std::nullopt);
// The object's "type"; an error when `value` is not an object or has none.
absl::StatusOr<std::string> TypeField(const nlohmann::json& value, absl::string_view path);
// The array under `key`; an error when absent or not an array.
absl::StatusOr<const nlohmann::json*> ArrayField(const nlohmann::json& object,
                                                 absl::string_view path, const char* key);

// {"String": "▁"} or {"Regex": "\\s+"}.
struct Pattern {
  bool is_regex = false;
  std::string text;
};
absl::StatusOr<Pattern> PatternField(const nlohmann::json& object, absl::string_view path,
                                     const char* key);

}  // namespace placer::tokenizer
