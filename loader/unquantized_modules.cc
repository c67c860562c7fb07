#include "loader/unquantized_modules.h"

#include <re2/re2.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

using nlohmann::json;

std::string Describe(absl::string_view field, const json& value) {
  std::string text = value.dump();
  if (text.size() > 200) text = text.substr(0, 197) + "...";
  return absl::StrCat(field, " ", text);
}

absl::StatusOr<std::string> ModuleName(const json& value, JsonWhere where) {
  PLACER_ASSIGN_OR_RETURN(std::string name, JsonAsString(value, where));
  if (name.empty()) return JsonError(where, "an empty module name");
  return name;
}

// Every element of `value` (an array) as a module name, or an error naming the element.
absl::StatusOr<std::vector<std::string>> Strings(const json& value, JsonWhere where) {
  if (!value.is_array()) return JsonError(where, "must be a list of module names");
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string path = IndexJsonPath(where.path, i);
    PLACER_ASSIGN_OR_RETURN(std::string name, ModuleName(value[i], {where.file, path}));
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace

absl::StatusOr<UnquantizedModules::Rule> UnquantizedModules::RegexRule(const std::string& pattern,
                                                                       JsonWhere where) {
  RE2::Options options;
  options.set_log_errors(false);
  auto regex = std::make_shared<const RE2>(pattern, options);
  if (!regex->ok()) {
    return JsonError(where, absl::StrCat("regular expression \"", pattern, "\" is not supported: ",
                                         regex->error(), " (RE2 syntax: no lookaround or "
                                         "backreferences)"));
  }
  return Rule{Match::kRegexFromStart, pattern, std::move(regex)};
}

absl::StatusOr<UnquantizedModules> UnquantizedModules::FromAwqNotConverted(const json& value,
                                                                           JsonWhere where) {
  UnquantizedModules out;
  PLACER_ASSIGN_OR_RETURN(const std::vector<std::string> names, Strings(value, where));
  for (const std::string& name : names) out.float_rules_.push_back({Match::kContains, name, nullptr});
  if (!names.empty()) out.description_ = Describe(where.path, value);
  return out;
}

absl::StatusOr<UnquantizedModules> UnquantizedModules::FromGptqBlockModules(const json& value,
                                                                            JsonWhere where) {
  UnquantizedModules out;
  if (!value.is_array()) return JsonError(where, "must be a list of lists of module names");
  out.has_quantized_suffixes_ = true;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string path = IndexJsonPath(where.path, i);
    // optimum flattens the inner lists; a flat list of names means the same.
    if (value[i].is_string()) {
      PLACER_ASSIGN_OR_RETURN(std::string name, ModuleName(value[i], {where.file, path}));
      out.quantized_suffixes_.push_back(std::move(name));
      continue;
    }
    PLACER_ASSIGN_OR_RETURN(std::vector<std::string> names, Strings(value[i], {where.file, path}));
    for (std::string& name : names) out.quantized_suffixes_.push_back(std::move(name));
  }
  out.description_ = Describe(where.path, value);
  return out;
}

absl::StatusOr<UnquantizedModules> UnquantizedModules::FromGptqDynamic(const json& value,
                                                                       JsonWhere where) {
  UnquantizedModules out;
  if (!value.is_object()) return JsonError(where, "must be an object of module regexes");
  std::vector<std::string> skipped;
  for (const auto& [key, unused_overrides] : value.items()) {
    (void)unused_overrides;
    const std::string path = JoinJsonPath(where.path, key);
    const bool skip = absl::StartsWith(key, "-:");
    const std::string pattern = skip || absl::StartsWith(key, "+:") ? key.substr(2) : key;
    PLACER_ASSIGN_OR_RETURN(Rule rule, RegexRule(pattern, {where.file, path}));
    // A positive key's overrides are the format's (PrequantizedFormat::groups).
    if (skip) {
      out.float_rules_.push_back(std::move(rule));
      skipped.push_back(key);
    }
  }
  if (!skipped.empty()) out.description_ = Describe(where.path, json(skipped));
  return out;
}

absl::StatusOr<UnquantizedModules> UnquantizedModules::FromCompressedTensorsIgnore(
    const json& value, JsonWhere where) {
  UnquantizedModules out;
  PLACER_ASSIGN_OR_RETURN(const std::vector<std::string> names, Strings(value, where));
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (absl::StartsWith(name, "re:")) {
      PLACER_ASSIGN_OR_RETURN(Rule rule,
                              RegexRule(name.substr(3), {where.file, IndexJsonPath(where.path, i)}));
      out.float_rules_.push_back(std::move(rule));
    } else if (name == "Linear") {
      out.float_rules_.push_back({Match::kEveryLinear, name, nullptr});
    } else {
      out.float_rules_.push_back({Match::kEquals, name, nullptr});
    }
  }
  // ["lm_head"] is every such checkpoint's (the head is never quantized here anyway).
  if (!(names.empty() || (names.size() == 1 && names[0] == "lm_head"))) {
    out.description_ = Describe(where.path, value);
  }
  return out;
}

void UnquantizedModules::Add(UnquantizedModules other) {
  for (Rule& rule : other.float_rules_) float_rules_.push_back(std::move(rule));
  if (other.has_quantized_suffixes_) {
    has_quantized_suffixes_ = true;
    for (std::string& suffix : other.quantized_suffixes_) quantized_suffixes_.push_back(std::move(suffix));
  }
  if (!other.description_.empty()) {
    description_ = description_.empty() ? other.description_
                                        : absl::StrCat(description_, "; ", other.description_);
  }
}

bool UnquantizedModules::Covers(absl::string_view module) const {
  for (const Rule& rule : float_rules_) {
    switch (rule.match) {
      case Match::kContains:
        if (absl::StrContains(module, rule.text)) return true;
        break;
      case Match::kEquals:
        if (module == rule.text) return true;
        break;
      case Match::kEveryLinear: return true;
      case Match::kRegexFromStart:
        if (rule.regex->Match(re2::StringPiece(module.data(), module.size()), 0, module.size(),
                              RE2::ANCHOR_START, nullptr, 0)) {
          return true;
        }
        break;
    }
  }
  if (!has_quantized_suffixes_) return false;
  for (const std::string& suffix : quantized_suffixes_) {
    if (absl::EndsWith(module, suffix)) return false;
  }
  return true;
}

}  // namespace placer::loader
