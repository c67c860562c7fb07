// compressed-tensors' quantization_config (llm-compressor): "pack-quantized" int4/int8 and
// "int-quantized" int8 weights, channel or group strategies, config groups by targets, ignore
// lists. Every field is validated; an option placer does not implement is an error naming it.
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "loader/prequantized_config.h"
#include "loader/prequantized_fields.h"

namespace placer::loader {

// The format of `config` (the quantization_config object at `where`).
absl::StatusOr<PrequantizedFormat> ParseCompressedTensors(const nlohmann::json& config,
                                                          const prequantized_fields::Where& where);

}  // namespace placer::loader
