#include "placement/plan_report.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "placement/byte_size.h"
#include "placement/device_map.h"

namespace placer::placement {
namespace {

// "model.layers.12" -> ("model.layers.", 12); false when not numbered.
bool SplitNumbered(const std::string& name, std::string& stem, int& number) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  stem = name.substr(0, dot + 1);
  return absl::SimpleAtoi(name.substr(dot + 1), &number) &&
         std::isdigit(static_cast<unsigned char>(name[dot + 1]));
}

std::string Signed(std::int64_t bytes) {
  return bytes < 0 ? "-" + FormatBytes(static_cast<std::uint64_t>(-bytes))
                   : FormatBytes(static_cast<std::uint64_t>(bytes));
}

}  // namespace

std::string QuantizationSummary(const Plan& plan) {
  if (!plan.sizing.quantize.packs_any()) return "";
  const std::string kept =
      plan.sizing.compute_dtype ? std::string(loader::DTypeName(*plan.sizing.compute_dtype))
                                : "their own dtype";
  if (!plan.sizing.quantize.enabled()) {
    // The head alone: what the layers are (float, or a pre-quantized checkpoint's packing) is
    // said elsewhere.
    return absl::StrCat("--quantize-lm-head ", loader::DescribeQuantizeOptions(plan.sizing.quantize.LmHead()),
                        ": lm_head sized and held packed",
                        plan.sizing.lm_head_tied
                            ? " (the lm_head is tied: one packed table, whose lookup dequantizes "
                              "the rows it reads)"
                            : "",
                        "; the other weights stay ", kept,
                        " (a pre-quantized checkpoint's packed layers aside)");
  }
  if (plan.sizing.quantize.quantizes_lm_head() && plan.sizing.lm_head_tied) {
    return absl::StrCat("--quantize ", loader::DescribeQuantizeOptions(plan.sizing.quantize),
                        ": decoder-layer linear weights and lm_head, sized and held packed (the "
                        "lm_head is tied: one packed table, whose lookup dequantizes the rows it "
                        "reads); norms and biases stay ", kept);
  }
  if (plan.sizing.quantize.quantizes_lm_head()) {
    return absl::StrCat("--quantize ", loader::DescribeQuantizeOptions(plan.sizing.quantize),
                        ": decoder-layer linear weights and lm_head, sized and held packed; "
                        "embeddings, norms and biases stay ", kept);
  }
  return absl::StrCat("--quantize ", loader::DescribeQuantizeOptions(plan.sizing.quantize),
                      ": decoder-layer linear weights, sized and held packed; embeddings, "
                      "norms, biases and lm_head stay ", kept);
}

std::vector<std::string> OffloadedBlocks(const Plan& plan) {
  bool has_gpu = false;
  for (const DevicePlan& device : plan.devices) {
    has_gpu = has_gpu || (device.device.is_gpu() && device.budget_bytes > 0);
  }
  std::vector<std::string> keys;
  for (const auto& [key, device] : plan.device_map) {
    if (device.kind == DeviceKind::kDisk || (has_gpu && device.kind == DeviceKind::kCpu)) {
      keys.push_back(key);
    }
  }
  return keys;
}

std::string OffloadExecutionName(const Plan& plan) {
  if (OffloadedBlocks(plan).empty()) return "none";
  if (!plan.offload_staged) return "cpu";
  return plan.staging_slots >= 2 ? "staged_prefetch" : "staged_one_slot";
}

nlohmann::ordered_json PlanToJson(const Plan& plan) {
  nlohmann::ordered_json json;
  json["device_map"] = DeviceMapToJson(plan.device_map);
  json["execution_map"] = DeviceMapToJson(plan.execution_map);
  json["devices"] = nlohmann::ordered_json::array();
  for (const DevicePlan& device : plan.devices) {
    nlohmann::ordered_json entry;
    entry["name"] = device.device.Name();
    entry["description"] = device.description;
    entry["budget_bytes"] = device.budget_bytes;
    entry["budget_source"] = device.budget_source;
    entry["weights_bytes"] = device.weights_bytes;
    entry["reserved_bytes"] = device.reserved_bytes();
    entry["kv_reserve_bytes"] = device.kv_reserve_bytes;
    entry["activation_reserve_bytes"] = device.activation_reserve_bytes;
    entry["staging_reserve_bytes"] = device.staging_reserve_bytes;
    entry["left_bytes"] = device.left_bytes();
    json["devices"].push_back(entry);
  }
  json["reasons"] = nlohmann::ordered_json::object();
  for (const auto& [key, why] : plan.reasons) json["reasons"][key] = why;
  json["strategy"] = std::string(StrategyName(plan.strategy));
  if (!plan.strategy_note.empty()) json["strategy_note"] = plan.strategy_note;
  json["execution_device"] = DeviceToHfJson(plan.execution_device);
  nlohmann::ordered_json execution;
  execution["mode"] = OffloadExecutionName(plan);
  execution["device"] = plan.execution_device.Name();
  execution["staging_slots"] = plan.staging_slots;
  execution["prefetch"] = plan.offload_staged && plan.sizing.prefetch;
  execution["blocks"] = OffloadedBlocks(plan);
  execution["reason"] = plan.execution_reason;
  json["offload_execution"] = execution;
  if (plan.sizing.quantize.packs_any()) {
    nlohmann::ordered_json quantize;
    quantize["scheme"] = !plan.sizing.quantize.enabled() ? "none"
                         : plan.sizing.quantize.scheme == loader::QuantScheme::kInt4 ? "int4"
                                                                                     : "int8";
    quantize["group_size"] = plan.sizing.quantize.group_size;  // 0: per output channel
    quantize["covers"] = !plan.sizing.quantize.enabled() ? "lm_head"
                         : plan.sizing.quantize.quantizes_lm_head()
                             ? "decoder-layer linear weights, lm_head"
                             : "decoder-layer linear weights";
    if (plan.sizing.quantize.quantizes_lm_head()) {
      quantize["lm_head"] = plan.sizing.quantize.lm_head == loader::QuantScheme::kInt4 ? "int4" : "int8";
    }
    quantize["activations"] = plan.sizing.quantize.int8_activations ? "int8" : "float";
    quantize["summary"] = QuantizationSummary(plan);
    json["quantize"] = quantize;
  }
  return json;
}

std::string PlanToTable(const Plan& plan) {
  const std::vector<std::string> offloaded = OffloadedBlocks(plan);
  std::string out = absl::StrCat(
      "Device map (", StrategyName(plan.strategy), "; offloaded blocks: ",
      offloaded.empty() ? "none"
                        : absl::StrCat(OffloadExecutionName(plan), " on ",
                                       plan.execution_device.Name()),
      "):\n");
  std::size_t width = 0;
  for (const auto& entry : plan.device_map) width = std::max(width, entry.first.size() + 6);
  const auto& map = plan.device_map;
  for (std::size_t i = 0; i < map.size();) {
    std::string stem;
    int first = 0;
    std::size_t j = i + 1;
    if (SplitNumbered(map[i].first, stem, first)) {
      std::string next_stem;
      int next = 0;
      while (j < map.size() && map[j].second == map[i].second &&
             SplitNumbered(map[j].first, next_stem, next) && next_stem == stem &&
             next == first + static_cast<int>(j - i)) {
        ++j;
      }
    }
    const std::string name = j - i > 1 ? absl::StrCat(stem, first, "-", first + (j - i) - 1)
                                       : (map[i].first.empty() ? "(whole model)" : map[i].first);
    absl::StrAppendFormat(&out, "  %-*s %s\n", static_cast<int>(width), name,
                          map[i].second.Name());
    i = j;
  }
  absl::StrAppendFormat(&out, "\n%-8s %12s %12s %12s %14s %12s\n", "device", "budget",
                        "weights", "KV reserve", "act+staging", "left");
  for (const DevicePlan& device : plan.devices) {
    absl::StrAppendFormat(
        &out, "%-8s %12s %12s %12s %14s %12s\n", device.device.Name(),
        FormatBytes(device.budget_bytes), FormatBytes(device.weights_bytes),
        FormatBytes(device.kv_reserve_bytes),
        FormatBytes(device.activation_reserve_bytes + device.staging_reserve_bytes),
        Signed(device.left_bytes()));
  }
  if (plan.sizing.quantize.packs_any()) absl::StrAppend(&out, "\nQuantized: ", QuantizationSummary(plan), "\n");
  if (!plan.strategy_note.empty()) absl::StrAppend(&out, "\nStrategy: ", plan.strategy_note, "\n");
  if (!offloaded.empty()) {
    absl::StrAppend(&out, "\nOffloaded blocks (", offloaded.size(), "): ", plan.execution_reason,
                    "\n");
  }
  if (!plan.reasons.empty()) {
    out += "\nPlaced off the GPUs:\n";
    for (const auto& [key, why] : plan.reasons) {
      absl::StrAppend(&out, "  ", key.empty() ? "(whole model)" : key, ": ", why, "\n");
    }
  }
  return out;
}

}  // namespace placer::placement
