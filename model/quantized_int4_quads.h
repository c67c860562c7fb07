// Inside QuantizedLinearKernel (AVX-512): float32 rows (the decode steps of an F32 checkpoint
// under --quantize int4, or of a 4-bit GPTQ / AWQ / compressed-tensors one served in F32) times
// 4-bit packed weights whose groups are multiples of 128 inputs (the usual 128, and per-channel).
//
// The general float kernel (quantized_kernels.cc) widens 16 bytes of codes to dwords, picks each
// weight from its block's 16-entry table with a permute and keeps two multiply-add chains per
// output. At one input row those two chains bound it: an fma waits for the one before it on its
// chain (4 cycles on Zen 4), so 32 weights cost at least 4 cycles whatever the rest.
// Here 128 codes (64 bytes, inside one block) are one load; a dword holds 8 codes, and the
// permute reads the low 4 bits of each lane, so the k-th shift by 4 puts the k-th code of every
// lane under the permute: no widening. The row's inputs are arranged once per call in that
// order (ArrangeInt4QuadInputs), and the 8 products of a quad go to 4 chains.
//
// Every output is computed in one fixed order: per block (table fma(q, s, m) as the loader
// dequantizes), per quad, for shift k = 0..7, chain k % 4 += weight · input; then
// ((c0 + c1) + (c2 + c3)), its lanes summed in _mm512_reduce_add_ps's order, plus the bias;
// whatever the other rows of the call or the thread count (batch invariance). It differs from the
// general kernel's order, so the last float32 bits differ from it, not from the float64 product
// beyond float32 rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// 4-bit weights in groups of a multiple of 128 inputs (any CPU QuantIsa::kAvx512 runs on).
bool Int4QuadsApply(const loader::PackedLayout& layout);

// The rows of op.x as the kernel reads them: per 128 inputs, 8 vectors of 16, the k-th holding
// the inputs of the k-th code of each lane; in `buffer` (resized), at the 64-byte aligned
// address returned. Requires Int4QuadsApply.
const float* ArrangeInt4QuadInputs(const QuantOperands& op, base::CacheLineVector<float>* buffer);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `quads`). Requires
// Int4QuadsApply and an AVX-512 F/BW CPU.
void QuantizedRowsInt4Quads(const QuantOperands& op, const float* quads, int64_t n0, int64_t n1);

}  // namespace placer::model
