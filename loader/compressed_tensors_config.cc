#include "loader/compressed_tensors_config.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

using nlohmann::json;
using prequantized_fields::ReadGroupSize;
using prequantized_fields::RequireFalse;
using prequantized_fields::Where;

absl::StatusOr<PrequantizedMethod> CompressedPacking(const std::string& packing,
                                                     const Where& where) {
  if (packing == "pack-quantized") return PrequantizedMethod::kCompressedPacked;
  if (packing == "int-quantized") return PrequantizedMethod::kCompressedInt;
  return where.Error("format", absl::StrCat("'", packing,
                                            "' is not supported (\"pack-quantized\" or "
                                            "\"int-quantized\")"));
}

// One config group's scheme; `packing` is the checkpoint's `format` ("mixed-precision": the
// group must name its own).
absl::StatusOr<PrequantizedFormat> ParseCompressedTensorsScheme(const json& scheme,
                                                                const Where& group,
                                                                const std::string& packing) {
  PrequantizedFormat format;
  format.zeros_minus_one = false;
  format.source = absl::StrCat(group.file, " ", group.path);
  PLACER_ASSIGN_OR_RETURN(const json* own, FindJsonField(scheme, group.at(), "format"));
  if (own == nullptr && packing == "mixed-precision") {
    return group.Error("format", "is required: the checkpoint's format is \"mixed-precision\"");
  }
  const Where format_where = own != nullptr ? group : Where{group.file, ""};
  PLACER_ASSIGN_OR_RETURN(const std::string group_packing,
                          own != nullptr ? ReadStringField(scheme, group.at(), "format")
                                         : absl::StatusOr<std::string>(packing));
  PLACER_ASSIGN_OR_RETURN(format.method, CompressedPacking(group_packing, format_where));
  PLACER_ASSIGN_OR_RETURN(const json* weights, ReadObjectField(scheme, group.at(), "weights"));
  const Where w{group.file, JoinJsonPath(group.path, "weights")};
  PLACER_ASSIGN_OR_RETURN(const std::int64_t bits, ReadIntField(*weights, w.at(), "num_bits"));
  const bool packed = format.method == PrequantizedMethod::kCompressedPacked;
  if (bits != 8 && !(packed && bits == 4)) {
    return w.Error("num_bits", absl::StrCat(bits, "-bit ", group_packing,
                                            " weights are not supported (", packed ? "4 or 8" : "8",
                                            ")"));
  }
  format.bits = static_cast<int>(bits);
  PLACER_ASSIGN_OR_RETURN(const std::string type, ReadStringField(*weights, w.at(), "type", "int"));
  if (type != "int") return w.Error("type", absl::StrCat("'", type, "' weights are not supported (\"int\")"));
  PLACER_ASSIGN_OR_RETURN(format.symmetric, ReadBoolField(*weights, w.at(), "symmetric", true));
  PLACER_RETURN_IF_ERROR(RequireFalse(*weights, w, "dynamic", "dynamic weight scales are not supported"));
  // "weight" and "static" quantize in activation order but store the groups in input order;
  // "group" (or true) stores them in activation order, each input's group in weight_g_idx.
  PLACER_ASSIGN_OR_RETURN(const json* actorder, FindJsonField(*weights, w.at(), "actorder"));
  if (actorder != nullptr && !actorder->is_null() && *actorder != false && *actorder != "weight" &&
      *actorder != "static") {
    if (*actorder != "group" && *actorder != true) {
      return w.Error("actorder", absl::StrCat(actorder->dump(), " is not an activation ordering "
                                              "(null, \"group\", \"weight\" or \"static\")"));
    }
    if (!packed) return w.Error("actorder", "activation-ordered groups need pack-quantized weights");
    format.desc_act = true;
  }
  PLACER_ASSIGN_OR_RETURN(const std::string strategy, ReadStringField(*weights, w.at(), "strategy"));
  if (strategy == "channel") {
    format.group_size = 0;
  } else if (strategy == "group" && packed) {
    PLACER_RETURN_IF_ERROR(ReadGroupSize(*weights, w, "group_size", format));
    if (format.group_size == 0) return w.Error("group_size", "must be positive for strategy \"group\"");
  } else {
    return w.Error("strategy", absl::StrCat("'", strategy, "' is not supported (",
                                            packed ? "\"group\" or \"channel\"" : "\"channel\"", ")"));
  }
  PLACER_ASSIGN_OR_RETURN(const json* inputs, FindJsonField(scheme, group.at(), "input_activations"));
  if (inputs != nullptr) {
    const Where in{group.file, JoinJsonPath(group.path, "input_activations")};
    PLACER_ASSIGN_OR_RETURN(const bool dynamic, ReadBoolField(*inputs, in.at(), "dynamic", false));
    if (packed || !dynamic) {
      return in.Error("dynamic", "only dynamic activation quantization of int-quantized weights "
                                 "is supported (served in the compute dtype)");
    }
    format.dynamic_int8_activations = true;
  }
  PLACER_ASSIGN_OR_RETURN(const json* outputs, FindJsonField(scheme, group.at(), "output_activations"));
  if (outputs != nullptr) return group.Error("output_activations", "output quantization is not supported");
  return format;
}

// A group's `targets`: "Linear" (every linear), full module names, "re:" patterns.
absl::StatusOr<TargetedFormat> ParseCompressedTensorsTargets(const json& scheme,
                                                             const Where& group) {
  TargetedFormat targeted;
  targeted.name = group.path.substr(group.path.rfind('.') + 1);
  targeted.selector = JoinJsonPath(group.path, "targets");
  PLACER_ASSIGN_OR_RETURN(const json* targets, ReadArrayField(scheme, group.at(), "targets"));
  const std::string path = JoinJsonPath(group.path, "targets");
  if (targets->empty()) return group.Error("targets", "names no module");
  json named = json::array();
  for (std::size_t i = 0; i < targets->size(); ++i) {
    const std::string at_path = IndexJsonPath(path, i);
    const JsonWhere at{group.file, at_path};
    PLACER_ASSIGN_OR_RETURN(const std::string target, JsonAsString((*targets)[i], at));
    if (target == "Linear") {
      targeted.every_linear = true;
    } else if (absl::StartsWith(target, "re:") || absl::StrContains(target, '.')) {
      named.push_back(target);
    } else {
      return JsonError(at, absl::StrCat("\"", target, "\" is not supported (\"Linear\", a full "
                                        "module name such as \"model.layers.0.mlp.down_proj\", or "
                                        "a \"re:\" pattern)"));
    }
  }
  PLACER_ASSIGN_OR_RETURN(targeted.named,
                          UnquantizedModules::FromCompressedTensorsIgnore(named, {group.file, path}));
  targeted.targets = targets->dump();
  if (targeted.targets.size() > 200) targeted.targets = targeted.targets.substr(0, 197) + "...";
  return targeted;
}

}  // namespace

absl::StatusOr<PrequantizedFormat> ParseCompressedTensors(const json& config,
                                                          const Where& where) {
  PLACER_ASSIGN_OR_RETURN(const std::string packing,
                          ReadStringField(config, where.at(), "format"));
  if (packing != "mixed-precision") PLACER_RETURN_IF_ERROR(CompressedPacking(packing, where).status());
  PLACER_ASSIGN_OR_RETURN(const std::string status,
                          ReadStringField(config, where.at(), "quantization_status", "compressed"));
  if (status != "compressed") {
    return where.Error("quantization_status",
                       absl::StrCat("'", status, "': only compressed checkpoints are stored packed"));
  }
  UnquantizedModules ignored;
  PLACER_ASSIGN_OR_RETURN(const json* ignore, FindJsonField(config, where.at(), "ignore"));
  if (ignore != nullptr) {
    PLACER_ASSIGN_OR_RETURN(ignored, UnquantizedModules::FromCompressedTensorsIgnore(
                                         *ignore, {where.file, JoinJsonPath(where.path, "ignore")}));
  }
  PLACER_ASSIGN_OR_RETURN(const json* sparsity, FindJsonField(config, where.at(), "sparsity_config"));
  if (sparsity != nullptr && !(sparsity->is_object() && sparsity->empty())) {
    return where.Error("sparsity_config", "sparse checkpoints are not supported");
  }
  PLACER_ASSIGN_OR_RETURN(const json* kv_cache, FindJsonField(config, where.at(), "kv_cache_scheme"));
  if (kv_cache != nullptr) return where.Error("kv_cache_scheme", "a quantized KV cache is not supported");

  PLACER_ASSIGN_OR_RETURN(const json* groups, ReadObjectField(config, where.at(), "config_groups"));
  const std::string groups_path = JoinJsonPath(where.path, "config_groups");
  if (groups->empty()) return where.Error("config_groups", "holds no group");
  std::vector<TargetedFormat> targeted;
  std::string every_linear;  // the group targeting "Linear"
  for (const auto& [key, scheme] : groups->items()) {
    const Where group{where.file, JoinJsonPath(groups_path, key)};
    PLACER_ASSIGN_OR_RETURN(TargetedFormat one, ParseCompressedTensorsTargets(scheme, group));
    PLACER_ASSIGN_OR_RETURN(PrequantizedFormat format,
                            ParseCompressedTensorsScheme(scheme, group, packing));
    one.format = std::make_shared<const PrequantizedFormat>(std::move(format));
    if (one.every_linear) {
      if (!every_linear.empty()) {
        return group.Error("targets", absl::StrCat("names \"Linear\" as ", every_linear,
                                                   " does: which one quantizes a linear is "
                                                   "ambiguous"));
      }
      every_linear = one.selector;
    }
    targeted.push_back(std::move(one));
  }
  PrequantizedFormat format = *targeted.front().format;
  format.unquantized = std::move(ignored);
  // One group for every linear: the plain case, one format.
  const bool one_format = targeted.size() == 1 && targeted.front().every_linear &&
                          targeted.front().named.empty();
  if (!one_format) format.groups = std::move(targeted);
  return format;
}
}  // namespace placer::loader
