// One group of float32 weights quantized into its packed block (loader/quantized_layout.h):
// the arithmetic of --quantize, without ATen, so that QuantizeLinearWeight can run it row by row
// straight into the packed tensor.
//
// Built with -fno-trapping-math (loader/CMakeLists.txt): without it GCC keeps the selects of the
// rounding and clamping as branches and does not vectorize them. The results are the same (no
// code here reads the floating-point exception flags).
#pragma once

#include <cstdint>

#include "loader/quantized_layout.h"

namespace placer::loader {

// The `n` inputs of one group into `block` (scale, offset, then the codes in the layout's order;
// a 4-bit block's payload must be zeros or is overwritten whole: n a multiple of 32), by the
// formulas QuantizeLinearWeight states (quantized_weight.h), float operation for float operation
// in the order the tensor version of those formulas ran them, so the bytes are the same bit for
// bit (tested against it). `codes` is scratch for n ints.
void QuantizeGroup(const float* x, int64_t n, int bits, int32_t* codes, uint8_t* block);

}  // namespace placer::loader
