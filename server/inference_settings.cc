#include "server/inference_settings.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace placer::server::oip {
namespace {

// The backends' names; `stop_words` (TensorRT-LLM) and `random_seed` (TensorRT-LLM) are the
// same settings as vLLM's `stop` and `seed`.
const std::vector<std::string> kNames = {"max_tokens",
                                         "temperature",
                                         "top_p",
                                         "top_k",
                                         "seed",
                                         "stop",
                                         "ignore_eos",
                                         "stream",
                                         "repetition_penalty",
                                         "exclude_input_in_output",
                                         "all_positions"};

std::string Canonical(absl::string_view name) {
  if (name == "stop_words") return "stop";
  if (name == "random_seed") return "seed";
  return std::string(name);
}

absl::Status Invalid(const std::string& where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

absl::StatusOr<bool> AsBool(const SettingValue& value, const std::string& where) {
  if (const bool* b = std::get_if<bool>(&value)) return *b;
  if (const std::string* s = std::get_if<std::string>(&value)) {
    if (*s == "true" || *s == "True" || *s == "1") return true;
    if (*s == "false" || *s == "False" || *s == "0") return false;
  }
  if (const int64_t* i = std::get_if<int64_t>(&value); i != nullptr && (*i == 0 || *i == 1)) {
    return *i == 1;
  }
  return Invalid(where, "must be a boolean (true or false)");
}

absl::StatusOr<int64_t> AsInteger(const SettingValue& value, const std::string& where) {
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i;
  if (const uint64_t* u = std::get_if<uint64_t>(&value)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(*u);
    }
    return Invalid(where, absl::StrCat(*u, " is too large"));
  }
  if (const double* d = std::get_if<double>(&value)) {
    if (std::isfinite(*d) && std::trunc(*d) == *d && std::fabs(*d) < 9.0e15) {
      return static_cast<int64_t>(*d);
    }
  }
  if (const std::string* s = std::get_if<std::string>(&value)) {
    int64_t parsed = 0;
    if (absl::SimpleAtoi(*s, &parsed)) return parsed;
  }
  return Invalid(where, "must be an integer");
}

absl::StatusOr<double> AsNumber(const SettingValue& value, const std::string& where) {
  double number = 0;
  bool ok = true;
  if (const double* d = std::get_if<double>(&value)) {
    number = *d;
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    number = static_cast<double>(*i);
  } else if (const uint64_t* u = std::get_if<uint64_t>(&value)) {
    number = static_cast<double>(*u);
  } else if (const std::string* s = std::get_if<std::string>(&value)) {
    ok = absl::SimpleAtod(*s, &number);
  } else {
    ok = false;
  }
  if (!ok || !std::isfinite(number)) return Invalid(where, "must be a finite number");
  return number;
}

absl::StatusOr<std::vector<std::string>> AsStrings(const SettingValue& value,
                                                   const std::string& where) {
  if (const std::string* s = std::get_if<std::string>(&value)) return std::vector<std::string>{*s};
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) return *list;
  return Invalid(where, "must be a string or a list of strings");
}

absl::StatusOr<uint32_t> AsCount(const SettingValue& value, const std::string& where) {
  PLACER_ASSIGN_OR_RETURN(const int64_t n, AsInteger(value, where));
  if (n < 0 || n > std::numeric_limits<uint32_t>::max()) {
    return Invalid(where, absl::StrCat(n, " is out of range [0, 4294967295]"));
  }
  return static_cast<uint32_t>(n);
}

// One JSON value as a setting value; objects and mixed arrays are not settings.
absl::StatusOr<SettingValue> FromJson(const nlohmann::json& json, const std::string& where) {
  switch (json.type()) {
    case nlohmann::json::value_t::boolean:
      return SettingValue(json.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return SettingValue(json.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return SettingValue(json.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return SettingValue(json.get<double>());
    case nlohmann::json::value_t::string:
      return SettingValue(json.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<std::string> strings;
      for (const nlohmann::json& element : json) {
        if (!element.is_string()) return Invalid(where, "a list may only hold strings");
        strings.push_back(element.get<std::string>());
      }
      return SettingValue(std::move(strings));
    }
    default:
      return Invalid(where, "must be a boolean, number, string or list of strings");
  }
}

}  // namespace

bool IsSettingName(absl::string_view name) {
  const std::string canonical = Canonical(name);
  for (const std::string& known : kNames) {
    if (known == canonical) return true;
  }
  return false;
}

const std::vector<std::string>& SettingNames() { return kNames; }

absl::Status ApplySetting(absl::string_view raw_name, const SettingValue& value,
                          const std::string& where, GenerationSettings* settings) {
  const std::string name = Canonical(raw_name);
  v1::SamplingParams& params = settings->params;
  if (name == "max_tokens") {
    PLACER_ASSIGN_OR_RETURN(const uint32_t n, AsCount(value, where));
    params.set_max_new_tokens(n);
  } else if (name == "temperature") {
    PLACER_ASSIGN_OR_RETURN(const double t, AsNumber(value, where));
    if (t < 0) return Invalid(where, absl::StrCat(t, " must be >= 0 (0 is greedy)"));
    params.set_temperature(static_cast<float>(t));
  } else if (name == "top_p") {
    PLACER_ASSIGN_OR_RETURN(const double p, AsNumber(value, where));
    if (!(p > 0 && p <= 1)) return Invalid(where, absl::StrCat(p, " must be in (0, 1]"));
    params.set_top_p(static_cast<float>(p));
  } else if (name == "top_k") {
    PLACER_ASSIGN_OR_RETURN(const int64_t k, AsInteger(value, where));
    // vLLM writes "no cut" as -1, placer as 0.
    if (k < -1 || k > std::numeric_limits<int32_t>::max()) {
      return Invalid(where, absl::StrCat(k, " must be >= 0, or -1 for no cut"));
    }
    params.set_top_k(k == -1 ? 0 : static_cast<uint32_t>(k));
  } else if (name == "seed") {
    PLACER_ASSIGN_OR_RETURN(const int64_t seed, AsInteger(value, where));
    if (seed < 0) return Invalid(where, absl::StrCat(seed, " must be >= 0 (0 picks one)"));
    params.set_seed(static_cast<uint64_t>(seed));
  } else if (name == "repetition_penalty") {
    PLACER_ASSIGN_OR_RETURN(const double penalty, AsNumber(value, where));
    if (!(penalty > 0)) return Invalid(where, absl::StrCat(penalty, " must be > 0"));
    params.set_repetition_penalty(static_cast<float>(penalty));
  } else if (name == "stop") {
    PLACER_ASSIGN_OR_RETURN(std::vector<std::string> stops, AsStrings(value, where));
    params.clear_stop();
    for (std::string& stop : stops) params.add_stop(std::move(stop));
  } else if (name == "ignore_eos") {
    PLACER_ASSIGN_OR_RETURN(const bool ignore, AsBool(value, where));
    params.set_ignore_eos(ignore);
  } else if (name == "stream") {
    PLACER_ASSIGN_OR_RETURN(settings->stream, AsBool(value, where));
  } else if (name == "exclude_input_in_output") {
    PLACER_ASSIGN_OR_RETURN(settings->exclude_input_in_output, AsBool(value, where));
  } else if (name == "all_positions") {
    PLACER_ASSIGN_OR_RETURN(settings->all_positions, AsBool(value, where));
  } else {
    return Invalid(where,
                   absl::StrCat("not a setting placer knows (known: ", absl::StrJoin(kNames, ", "),
                                "; stop_words and random_seed are aliases)"));
  }
  return absl::OkStatus();
}

absl::Status ApplySamplingParametersJson(absl::string_view text, GenerationSettings* settings) {
  const nlohmann::json json =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        "input 'sampling_parameters': not valid JSON (expected an object such as "
        "{\"temperature\": 0.7, \"max_tokens\": 64})");
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError("input 'sampling_parameters': must be a JSON object");
  }
  for (const auto& [key, value] : json.items()) {
    const std::string where = absl::StrCat("sampling_parameters.", key);
    if (value.is_null()) continue;  // vLLM's own default
    PLACER_ASSIGN_OR_RETURN(const SettingValue setting, FromJson(value, where));
    PLACER_RETURN_IF_ERROR(ApplySetting(key, setting, where, settings));
  }
  return absl::OkStatus();
}

}  // namespace placer::server::oip
