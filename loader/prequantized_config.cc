#include "loader/prequantized_config.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "loader/compressed_tensors_config.h"
#include "loader/prequantized_fields.h"

namespace placer::loader {
namespace {

using nlohmann::json;
using prequantized_fields::Where;
using prequantized_fields::ReadGroupSize;
using prequantized_fields::RequireFalse;

// GPTQModel's positive `dynamic` keys with overrides: `base` (every other linear) first, then
// one format per key; empty when no key overrides anything. Keys that only tune the
// quantization run (damping, ordering heuristics) change nothing stored and are accepted.
absl::StatusOr<std::vector<TargetedFormat>> GptqDynamicOverrides(const json& dynamic,
                                                                 const Where& where,
                                                                 const PrequantizedFormat& base) {
  std::vector<TargetedFormat> out;
  for (const auto& [key, overrides] : dynamic.items()) {
    if (absl::StartsWith(key, "-:") || overrides.is_null()) continue;
    const Where at{where.file, JoinJsonPath(where.path, key)};
    if (!overrides.is_object()) return JsonError(at.at(), "must be an object of overrides");
    if (overrides.empty()) continue;
    PrequantizedFormat format = base;
    format.source = absl::StrCat(where.file, " ", at.path);
    for (const auto& [field, value] : overrides.items()) {
      (void)value;
      if (field == "bits") {
        PLACER_ASSIGN_OR_RETURN(const std::int64_t bits, ReadIntField(overrides, at.at(), "bits"));
        if (bits != 4 && bits != 8) {
          return at.Error("bits", absl::StrCat(bits, "-bit GPTQ is not supported (4 or 8)"));
        }
        format.bits = static_cast<int>(bits);
      } else if (field == "sym") {
        PLACER_ASSIGN_OR_RETURN(format.symmetric, ReadBoolField(overrides, at.at(), "sym", true));
      } else if (field == "desc_act") {
        PLACER_ASSIGN_OR_RETURN(format.desc_act, ReadBoolField(overrides, at.at(), "desc_act", false));
      } else if (field != "group_size" && field != "damp_percent" &&
                 field != "damp_auto_increment" && field != "static_groups" &&
                 field != "true_sequential" && field != "mse") {
        return at.Error(field, "is not an override placer implements (bits, group_size, sym, "
                               "desc_act; damp_percent, damp_auto_increment, static_groups, "
                               "true_sequential and mse change nothing stored)");
      }
    }
    // After bits: a 4-bit group must be a multiple of 32.
    if (overrides.contains("group_size")) {
      PLACER_RETURN_IF_ERROR(ReadGroupSize(overrides, at, "group_size", format));
    } else if (format.bits == 4 && format.group_size % 32 != 0) {
      return at.Error("bits", absl::StrCat("4-bit groups of ", format.group_size,
                                           " inputs are not supported (a multiple of 32)"));
    }
    TargetedFormat one;
    one.name = key;
    one.selector = at.path;
    one.targets = key;
    const std::string pattern = absl::StartsWith(key, "+:") ? key.substr(2) : key;
    PLACER_ASSIGN_OR_RETURN(one.named, UnquantizedModules::FromCompressedTensorsIgnore(
                                           json::array({"re:" + pattern}), at.at()));
    one.format = std::make_shared<const PrequantizedFormat>(std::move(format));
    out.push_back(std::move(one));
  }
  if (out.empty()) return out;
  TargetedFormat every_other;
  every_other.selector = where.path;
  every_other.every_linear = true;
  PrequantizedFormat every_other_format = base;
  every_other_format.source = std::string(where.file);
  every_other.format = std::make_shared<const PrequantizedFormat>(std::move(every_other_format));
  out.insert(out.begin(), std::move(every_other));
  return out;
}

absl::StatusOr<PrequantizedFormat> ParseGptq(const json& config, const Where& where) {
  PrequantizedFormat format;
  format.method = PrequantizedMethod::kGptq;
  PLACER_ASSIGN_OR_RETURN(const std::int64_t bits, ReadIntField(config, where.at(), "bits"));
  if (bits != 4 && bits != 8) {
    return where.Error("bits", absl::StrCat(bits, "-bit GPTQ is not supported (4 or 8)"));
  }
  format.bits = static_cast<int>(bits);
  PLACER_RETURN_IF_ERROR(ReadGroupSize(config, where, "group_size", format));
  PLACER_ASSIGN_OR_RETURN(format.symmetric, ReadBoolField(config, where.at(), "sym", true));
  PLACER_ASSIGN_OR_RETURN(format.desc_act, ReadBoolField(config, where.at(), "desc_act", false));
  PLACER_ASSIGN_OR_RETURN(const std::string checkpoint_format,
                          ReadStringField(config, where.at(), "checkpoint_format", "gptq"));
  if (checkpoint_format == "gptq") {
    format.zeros_minus_one = true;
  } else if (checkpoint_format == "gptq_v2") {
    format.zeros_minus_one = false;
  } else {
    return where.Error("checkpoint_format",
                       absl::StrCat("'", checkpoint_format,
                                    "' is not supported (\"gptq\" or \"gptq_v2\")"));
  }
  PLACER_ASSIGN_OR_RETURN(format.quantized_lm_head,
                          ReadBoolField(config, where.at(), "lm_head", false));
  // optimum's list of the linears it quantized, and GPTQModel's "-:" regexes of those it skipped.
  PLACER_ASSIGN_OR_RETURN(const json* quantized,
                          FindJsonField(config, where.at(), "modules_in_block_to_quantize"));
  if (quantized != nullptr) {
    const std::string path = JoinJsonPath(where.path, "modules_in_block_to_quantize");
    PLACER_ASSIGN_OR_RETURN(UnquantizedModules modules,
                            UnquantizedModules::FromGptqBlockModules(*quantized, {where.file, path}));
    format.unquantized.Add(std::move(modules));
  }
  PLACER_ASSIGN_OR_RETURN(const json* dynamic, FindJsonField(config, where.at(), "dynamic"));
  if (dynamic != nullptr) {
    const std::string path = JoinJsonPath(where.path, "dynamic");
    PLACER_ASSIGN_OR_RETURN(UnquantizedModules modules,
                            UnquantizedModules::FromGptqDynamic(*dynamic, {where.file, path}));
    PLACER_ASSIGN_OR_RETURN(format.groups,
                            GptqDynamicOverrides(*dynamic, Where{where.file, path}, format));
    format.unquantized.Add(std::move(modules));
  }
  return format;
}

absl::StatusOr<PrequantizedFormat> ParseAwq(const json& config, const Where& where) {
  PrequantizedFormat format;
  format.method = PrequantizedMethod::kAwq;
  format.symmetric = false;
  format.zeros_minus_one = false;
  // AutoAWQ writes bits/group_size in config.json and w_bit/q_group_size in its own file.
  const char* bits_key = config.contains("bits") ? "bits" : "w_bit";
  PLACER_ASSIGN_OR_RETURN(const std::int64_t bits, ReadIntField(config, where.at(), bits_key));
  if (bits != 4) {
    return where.Error(bits_key, absl::StrCat(bits, "-bit AWQ is not supported (4)"));
  }
  format.bits = 4;
  PLACER_RETURN_IF_ERROR(ReadGroupSize(
      config, where, config.contains("group_size") ? "group_size" : "q_group_size", format));
  PLACER_ASSIGN_OR_RETURN(const bool zero_point,
                          ReadBoolField(config, where.at(), "zero_point", true));
  if (!zero_point) return where.Error("zero_point", "AWQ without zero points is not supported");
  PLACER_ASSIGN_OR_RETURN(std::string version,
                          ReadStringField(config, where.at(), "version", "gemm"));
  if (absl::AsciiStrToLower(version) != "gemm") {
    return where.Error("version",
                       absl::StrCat("AWQ '", version, "' packing is not supported (\"gemm\")"));
  }
  PLACER_ASSIGN_OR_RETURN(const json* skipped,
                          FindJsonField(config, where.at(), "modules_to_not_convert"));
  if (skipped != nullptr) {
    PLACER_ASSIGN_OR_RETURN(format.unquantized,
                            UnquantizedModules::FromAwqNotConverted(
                                *skipped, {where.file, JoinJsonPath(where.path, "modules_to_not_convert")}));
  }
  return format;
}

}  // namespace

absl::StatusOr<const PrequantizedFormat*> PrequantizedFormat::ForModule(
    absl::string_view module) const {
  if (unquantized.Covers(module)) return nullptr;
  if (groups.empty()) return this;
  const TargetedFormat* by_name = nullptr;
  const TargetedFormat* by_class = nullptr;
  for (const TargetedFormat& group : groups) {
    if (group.named.Covers(module)) {
      if (by_name != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": ", by_name->selector, " and ", group.selector, " both name ", module,
            ": which one quantizes it is ambiguous"));
      }
      by_name = &group;
    }
    if (group.every_linear) by_class = &group;
  }
  const TargetedFormat* chosen = by_name != nullptr ? by_name : by_class;
  return chosen != nullptr ? chosen->format.get() : nullptr;
}

std::string PrequantizedFormat::WhyFloat(absl::string_view module) const {
  if (unquantized.Covers(module)) return unquantized.description();
  absl::StatusOr<const PrequantizedFormat*> format = ForModule(module);
  if (!format.ok() || *format != nullptr) return "";
  return absl::StrCat("no config group of ", source, " targets it");
}

std::string PrequantizedFormat::Describe() const {
  if (!groups.empty() && method == PrequantizedMethod::kGptq) {
    // The first group is this format over every other linear.
    std::string text = groups.front().format->Describe();
    for (std::size_t i = 1; i < groups.size(); ++i) {
      absl::StrAppend(&text, "; dynamic ", groups[i].name, " ",
                      absl::StripPrefix(groups[i].format->Describe(), "GPTQ "));
    }
    return text;
  }
  if (!groups.empty()) {
    std::string text = "compressed-tensors config groups:";
    for (std::size_t i = 0; i < groups.size(); ++i) {
      absl::StrAppend(&text, i == 0 ? " " : "; ", groups[i].name, " ",
                      absl::StripPrefix(groups[i].format->Describe(), "compressed-tensors "),
                      " for ", groups[i].targets);
    }
    return text;
  }
  const std::string scales =
      group_size == 0 ? "one scale per output channel" : absl::StrCat("groups of ", group_size);
  switch (method) {
    case PrequantizedMethod::kGptq:
      return absl::StrCat("GPTQ ", bits, "-bit (", scales, symmetric ? ", sym" : ", asym",
                          desc_act ? ", desc_act" : "", zeros_minus_one ? ", v1" : ", v2",
                          quantized_lm_head ? ", lm_head" : "", ")");
    case PrequantizedMethod::kAwq: return absl::StrCat("AWQ GEMM ", bits, "-bit (", scales, ")");
    case PrequantizedMethod::kCompressedPacked:
      return absl::StrCat("compressed-tensors pack-quantized ", bits, "-bit (", scales,
                          symmetric ? ", symmetric" : ", asymmetric",
                          desc_act ? ", actorder group" : "", ")");
    case PrequantizedMethod::kCompressedInt:
      return absl::StrCat("compressed-tensors int-quantized 8-bit (", scales,
                          dynamic_int8_activations ? "; activations kept in the compute dtype" : "",
                          ")");
  }
  return "";
}

absl::StatusOr<PrequantizedFormat> ParsePrequantizedFormat(const json& config,
                                                           absl::string_view file,
                                                           absl::string_view path) {
  const Where where{file, std::string(path)};
  if (!config.is_object()) return JsonError(where.at(), "must be an object");
  PLACER_ASSIGN_OR_RETURN(const std::string method,
                          ReadStringField(config, where.at(), "quant_method"));
  absl::StatusOr<PrequantizedFormat> format;
  if (method == "gptq") {
    format = ParseGptq(config, where);
  } else if (method == "awq") {
    format = ParseAwq(config, where);
  } else if (method == "compressed-tensors") {
    format = ParseCompressedTensors(config, where);
  } else {
    return where.Error("quant_method",
                       absl::StrCat("'", method,
                                    "' is not supported (gptq, awq or compressed-tensors)"));
  }
  if (format.ok()) format->source = std::string(file);
  return format;
}

absl::StatusOr<PrequantizedFormat> ParseQuantizeConfigFile(absl::string_view json_text,
                                                           absl::string_view file) {
  json parsed = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return JsonError({file, ""}, "not valid JSON");
  if (!parsed.is_object()) return JsonError({file, ""}, "must be an object");
  if (!parsed.contains("quant_method")) parsed["quant_method"] = "gptq";
  return ParsePrequantizedFormat(parsed, file, "");
}

}  // namespace placer::loader
