// A plan as `placer plan` and placerd's start-up log show it: JSON
//   {"device_map": {...}, "execution_map": {...}, "devices": [{"name", "weights_bytes",
//    "reserved_bytes", "budget_bytes", ...}], "reasons": {...},
//    "offload_execution": {"mode", "device", "staging_slots", "prefetch", "blocks", "reason"}}
// with devices in device_map written as Hugging Face writes them, or a
// table readable in a terminal.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/plan.h"

namespace placer::placement {

nlohmann::ordered_json PlanToJson(const Plan& plan);

// Device-map keys of the blocks that run on the execution device without living on a GPU:
// those on disk, and those on cpu when the plan has a GPU.
std::vector<std::string> OffloadedBlocks(const Plan& plan);

// How offloaded blocks run: "staged_prefetch" (two slots), "staged_one_slot", "cpu", or
// "none" when nothing is offloaded.
std::string OffloadExecutionName(const Plan& plan);

// "--quantize int4 (groups of 128): decoder-layer linear weights, ...; embeddings, norms,
// biases and lm_head stay BF16"; empty without --quantize.
std::string QuantizationSummary(const Plan& plan);

// The device map (runs of consecutive layers on one device folded into
// "model.layers.0-15"), per device weights, KV reserve, activation and
// staging reserve, budget and what is left, then why blocks left the GPUs.
std::string PlanToTable(const Plan& plan);

}  // namespace placer::placement
