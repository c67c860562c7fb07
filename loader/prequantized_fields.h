// Internal to the pre-quantized config parsers (prequantized_config.cc,
// compressed_tensors_config.cc): where in which file a field sits, and the checks they share.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "loader/prequantized_config.h"

namespace placer::loader::prequantized_fields {

using nlohmann::json;

struct Where {
  absl::string_view file;
  std::string path;
  JsonWhere at() const { return {file, path}; }
  absl::Status Error(absl::string_view key, absl::string_view why) const {
    return JsonError({file, JoinJsonPath(path, key)}, why);
  }
};

// A field that must be false (or absent) because placer does not implement what true means.
inline absl::Status RequireFalse(const json& object, const Where& where, absl::string_view key,
                                 absl::string_view why) {
  PLACER_ASSIGN_OR_RETURN(const bool value, ReadBoolField(object, where.at(), key, false));
  if (value) return where.Error(key, why);
  return absl::OkStatus();
}

inline absl::Status ReadGroupSize(const json& object, const Where& where, absl::string_view key,
                                  PrequantizedFormat& format) {
  PLACER_ASSIGN_OR_RETURN(const std::int64_t group_size, ReadIntField(object, where.at(), key));
  if (group_size == -1) {
    format.group_size = 0;
    return absl::OkStatus();
  }
  if (group_size <= 0) {
    return where.Error(key, absl::StrCat("must be positive or -1, got ", group_size));
  }
  if (format.bits == 4 && group_size % 32 != 0) {
    return where.Error(key, absl::StrCat("4-bit groups of ", group_size,
                                         " inputs are not supported (a multiple of 32)"));
  }
  format.group_size = group_size;
  return absl::OkStatus();
}

}  // namespace placer::loader::prequantized_fields
