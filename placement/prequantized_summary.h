// What the plan says of a pre-quantized checkpoint (loader/prequantized_config.h): its format,
// where it was read from, what is held packed and what in the compute dtype. Printed by
// `placer plan` (table and JSON) and in placerd's start log.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "loader/dtype.h"
#include "loader/prequantized_config.h"
#include "loader/quantized_layout.h"

namespace placer::placement {

// "checkpoint GPTQ 4-bit (groups of 128, sym, v1), from config.json: decoder-layer linear
// weights repacked at load, sized and held packed; embeddings, norms, biases and lm_head in BF16";
// with `at_load` packing the head (--quantize-lm-head), "...; embeddings, norms and biases in
// BF16; lm_head packed at load, int8 (one scale per output channel), by --quantize-lm-head".
std::string PrequantizedSummary(const loader::PrequantizedFormat& format,
                                std::optional<loader::DType> compute_dtype,
                                const loader::QuantizeOptions& at_load = {});

// The plan JSON's "quantize" object for it: checkpoint (the format), covers, summary, and
// lm_head ("int8"/"int4") when `at_load` packs the head.
nlohmann::ordered_json PrequantizedJson(const loader::PrequantizedFormat& format,
                                        const std::string& summary,
                                        const loader::QuantizeOptions& at_load = {});

}  // namespace placer::placement
