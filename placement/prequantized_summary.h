// What the plan says of a pre-quantized checkpoint (loader/prequantized_config.h): its format,
// where it was read from, what is held packed and what in the compute dtype. Printed by
// `placer plan` (table and JSON) and in placerd's start log.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "loader/dtype.h"
#include "loader/prequantized_config.h"

namespace placer::placement {

// "checkpoint GPTQ 4-bit (groups of 128, sym, v1), from config.json: decoder-layer linear
// weights repacked at load, sized and held packed; embeddings, norms, biases and lm_head in BF16"
std::string PrequantizedSummary(const loader::PrequantizedFormat& format,
                                std::optional<loader::DType> compute_dtype);

// The plan JSON's "quantize" object for it: checkpoint (the format), covers, summary.
nlohmann::ordered_json PrequantizedJson(const loader::PrequantizedFormat& format,
                                        const std::string& summary);

}  // namespace placer::placement
