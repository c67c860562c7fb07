// Inside QuantizedLinear: BF16 rows (the decode steps of a BF16 checkpoint under --quantize int4,
// or of a 4-bit GPTQ / AWQ / compressed-tensors one) times 4-bit packed weights, on AVX512-BF16.
// The float kernels (quantized_kernels.h) widen every input to float32 and spend a table permute
// and an fma per weight: compute-bound, slower than the weights' bytes arrive (~1.1B model:
// 31 ms a step against 24 with int8 activations). Here a code q becomes the BF16 number
// 1 + q/16 by putting its 4 bits into the mantissa of 1.0 (a shift and one vpternlogd per 32
// codes: no table, no conversion, exact), and vdpbf16ps multiplies 32 of them with 32 BF16
// inputs into 16 float32 lanes. A block of scale s and offset m contributes
//   sum (q s + m) x  =  16 s · sum (1 + q/16) x  +  (m - 16 s) · X,
// X the block's input sum in float32 (the products are exact; the sums float32, so a result is
// within a few float32 roundings of the float64 product of the BF16 inputs and the weight
// fma(q, s, m), then rounded once to BF16).
//
// Every output is computed in one fixed order (per 128 inputs, four vdpbf16ps into a fresh
// vector, scaled into the output's accumulator; then the offsets block by block; a fixed lane
// sum), whatever the other rows of the call or the thread count: batch invariance. The results
// differ from the float kernels' in the last float32 bits (another order of the same exact
// products), never by more than the BF16 rounding they end in, in practice.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// Whether this CPU runs the kernel (AVX-512 F, BW, VL and BF16).
bool Int4Bf16KernelRuns();

// 4-bit weights (groups of any multiple of 32 inputs, as every 4-bit layout has).
bool Int4Bf16KernelApplies(const loader::PackedLayout& layout);

// The rows of op.x (float32 widened from BF16, so exact in BF16) as the kernel reads them: per
// 128 inputs, four vectors of 16 BF16 pairs in the order the codes' nibbles are taken apart;
// zeros past `in`. Requires Int4Bf16KernelRuns (it permutes with AVX-512 BW) and
// Int4Bf16KernelApplies.
void ArrangeInt4Bf16Inputs(const QuantOperands& op, base::CacheLineVector<uint32_t>* pairs);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `pairs`). Requires
// Int4Bf16KernelRuns and Int4Bf16KernelApplies.
void QuantizedRowsInt4Bf16(const QuantOperands& op, const uint32_t* pairs, int64_t n0, int64_t n1);

}  // namespace placer::model
