// A plan as `placer plan` and placerd's start-up log show it: JSON
//   {"device_map": {...}, "devices": [{"name", "weights_bytes",
//    "reserved_bytes", "budget_bytes", ...}], "reasons": {...}}
// with devices in device_map written as Hugging Face writes them, or a
// table readable in a terminal.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "placement/plan.h"

namespace placer::placement {

nlohmann::ordered_json PlanToJson(const Plan& plan);

// The device map (runs of consecutive layers on one device folded into
// "model.layers.0-15"), per device weights, KV reserve, activation and
// staging reserve, budget and what is left, then why blocks left the GPUs.
std::string PlanToTable(const Plan& plan);

}  // namespace placer::placement
