#include "model/generation_defaults.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "loader/checkpoint.h"

namespace placer::model {
namespace {

using nlohmann::json;

constexpr JsonWhere kTop{"generation_config.json", ""};

absl::Status FieldError(absl::string_view key, absl::string_view why) {
  return JsonError({kTop.file, key}, why);
}

// An integer field in [low, high]; absent or null keeps `out`.
template <typename T>
absl::Status ReadBoundedInt(const json& config, absl::string_view key, std::int64_t low,
                            std::int64_t high, T& out) {
  PLACER_ASSIGN_OR_RETURN(const std::optional<std::int64_t> value,
                          ReadOptionalIntField(config, kTop, key));
  if (!value) return absl::OkStatus();
  if (*value < low || *value > high) {
    return FieldError(key, absl::StrCat("must be in [", low, ", ", high, "], got ", *value));
  }
  out = static_cast<T>(*value);
  return absl::OkStatus();
}

// A finite number no smaller than `low` (above it when `low_open`); absent keeps `out`.
absl::Status ReadFloat(const json& config, absl::string_view key, double low, bool low_open,
                       double high, float& out) {
  PLACER_ASSIGN_OR_RETURN(const std::optional<double> value,
                          ReadOptionalNumberField(config, kTop, key));
  if (!value) return absl::OkStatus();
  if (!std::isfinite(*value) || *value < low || (low_open && *value == low) || *value > high) {
    return FieldError(key, absl::StrCat("must be in ", low_open ? "(" : "[", low, ", ", high,
                                        "], got ", *value));
  }
  out = static_cast<float>(*value);
  return absl::OkStatus();
}

absl::Status ReadEosIds(const json& config, std::vector<int32_t>& out) {
  PLACER_ASSIGN_OR_RETURN(const json* eos, FindJsonField(config, kTop, "eos_token_id"));
  if (eos == nullptr) return absl::OkStatus();
  const json list = eos->is_array() ? *eos : json::array({*eos});
  std::vector<int32_t> ids;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = eos->is_array() ? IndexJsonPath("eos_token_id", i) : "eos_token_id";
    PLACER_ASSIGN_OR_RETURN(const std::int64_t id, JsonAsInt(list[i], {kTop.file, path}));
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return JsonError({kTop.file, path}, absl::StrCat("is not a token id: ", id));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  if (!ids.empty()) out = std::move(ids);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerationDefaults> ReadGenerationDefaults(const loader::Checkpoint& checkpoint) {
  GenerationDefaults defaults;
  for (int64_t id : checkpoint.config().eos_token_ids) {
    defaults.eos_token_ids.push_back(static_cast<int32_t>(id));
  }
  const json& config = checkpoint.generation_config();  // {} when there is no file
  // eos_token_id here overrides config.json's (an int or a list).
  PLACER_RETURN_IF_ERROR(ReadEosIds(config, defaults.eos_token_ids));
  PLACER_RETURN_IF_ERROR(ReadBoundedInt(config, "max_new_tokens", 1,
                                        std::numeric_limits<uint32_t>::max(),
                                        defaults.max_new_tokens));
  PLACER_ASSIGN_OR_RETURN(const bool do_sample, ReadBoolField(config, kTop, "do_sample", false));
  if (do_sample) {
    defaults.sampling.temperature = 1.0f;
    defaults.sampling.top_k = 50;  // transformers' GenerationConfig default
    PLACER_RETURN_IF_ERROR(ReadFloat(config, "temperature", 0, false, 1e6,
                                     defaults.sampling.temperature));
    PLACER_RETURN_IF_ERROR(ReadBoundedInt(config, "top_k", 0,
                                          std::numeric_limits<uint32_t>::max(),
                                          defaults.sampling.top_k));
    PLACER_RETURN_IF_ERROR(ReadFloat(config, "top_p", 0, true, 1, defaults.sampling.top_p));
  }
  PLACER_RETURN_IF_ERROR(ReadFloat(config, "repetition_penalty", 0, true, 1e6,
                                   defaults.sampling.repetition_penalty));
  return defaults;
}

}  // namespace placer::model
