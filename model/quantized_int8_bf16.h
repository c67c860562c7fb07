// Inside QuantizedLinear: BF16 rows (the decode steps of a BF16 checkpoint under --quantize int8
// or --quantize-lm-head int8, or of an 8-bit GPTQ / compressed-tensors one) times 8-bit packed
// weights, on AVX512-BF16. The float kernels (quantized_kernels.h) widen every code and every
// input to float32 and spend a conversion and an fma per weight: 12.8 GB/s of codes a thread
// on a Zen 4 EPYC, where the BF16 and 4-bit x BF16 kernels stream 14-16. Here a code's two nibbles become
// two BF16 numbers in registers, 16 + l and 256 + 16 h (each nibble put into the mantissa of
// 16.0 or 256.0 by a shift and one vpternlogd per 32 codes: no table, no conversion, exact), whose
// sum is 272 + (q + 128) for the stored int8 q, and vdpbf16ps multiplies both with the code's
// input. A block of scale s and offset m contributes
//   sum (q s + m) x  =  s · sum (400 + q) x  +  (m - 400 s) · X,
// X the block's input sum in float32 (the products are exact; the sums float32, so a result is
// within a few float32 roundings of the magnitudes summed, then rounded once to BF16).
//
// The codes are read as aligned cache lines (aligned_code_lines.h): their 64-byte vectors start
// 8 bytes past a line, and on Zen 5 the split loads held the ~1.1B int8 step at 44-54 ms.
//
// Every output is computed in one fixed order (per 64 inputs, four vdpbf16ps into a fresh
// vector, added into the block's sum; the block's sum scaled into the output's accumulator; the
// offsets block by block; a fixed lane sum), whatever the other rows of the call or the thread
// count: batch invariance. The results differ from the float kernels' in the last float32 bits
// (another order of the same exact products), never by more than the BF16 rounding they end in,
// in practice.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// Whether this CPU runs the kernel (AVX-512 F, BW, VL and BF16).
bool Int8Bf16KernelRuns();

// 8-bit weights in groups of a multiple of 64 inputs (one per output channel, as --quantize
// int8 packs them, wherever `in` is a multiple of 64).
bool Int8Bf16KernelApplies(const loader::PackedLayout& layout);

// The rows of op.x (float32 widened from BF16, so exact in BF16) as the kernel reads them: per
// 64 inputs, two vectors of 16 BF16 pairs, (4i, 4i + 2) then (4i + 1, 4i + 3). Requires
// Int8Bf16KernelApplies.
void ArrangeInt8Bf16Inputs(const QuantOperands& op, base::CacheLineVector<uint32_t>* pairs);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `pairs`). Requires
// Int8Bf16KernelRuns and Int8Bf16KernelApplies.
void QuantizedRowsInt8Bf16(const QuantOperands& op, const uint32_t* pairs, int64_t n0, int64_t n1);

}  // namespace placer::model
