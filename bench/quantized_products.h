// The few-row products of a decode step over packed quantized weights (--quantize), on the
// `small` preset's decoder-layer shapes: placer's packed kernels on every ISA this CPU runs,
// the dequantize-into-a-buffer + GEMM path prompt chunks take, and the BF16 kernels and ATen's
// BF16 linear over the same weights unquantized. Where QuantizedLinearMaxRows comes from.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace placer::bench {

// For each count of input rows in `rows` (BF16 and F32 rows): milliseconds per pass over the 56
// linear weights of the small preset's 8 layers (median of `runs`), for int8 (per channel), int4
// groups of 32, 64 and 128 (or only the named `schemes`; empty: all), and BF16; with the bytes
// each pass reads.
nlohmann::json MeasureQuantizedProducts(int runs, const std::vector<int64_t>& rows,
                                        const std::vector<std::string>& schemes);

}  // namespace placer::bench
