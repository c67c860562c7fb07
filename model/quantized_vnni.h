// Inside QuantizedLinear under --quantize-activations int8: 4- and 8-bit packed weights multiplied
// with int8 activations by VNNI's vpdpbusd (AVX512-VNNI, or AVX-VNNI's 256-bit form in
// quantized_avx2_int8.cc with the same bits; unsigned codes x signed activations, four
// products summed into each int32 lane), or on plain AVX2 by vpmaddubsw and vpmaddwd (the same
// integers, so the same bits), as llama.cpp multiplies Q4_0 with Q8_0 and vLLM's CPU W8A8
// kernels quantize activations per token.
//
// Each input row is quantized per block of ActivationBlock inputs (32 or 64 for 4-bit weights
// in groups of 32 or 64, else 128, always inside one weight group): scale d = max|x| / 127, codes
// round-to-nearest-even(x / d) in [-127, 127]. A weight group g of row n then contributes
//   s_g · d_b · (sum of q · code over the block, exact in int32)  +  m_g · (sum of x over g)
// per block b, the offsets' share from the float group sums (exact). Every output is summed
// in one fixed order per row, so a row's result does not depend on the other rows of the call
// (batch invariance); it differs from the float kernels' by the activations' rounding, which
// is why the mode is opt-in.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// The kernel's instruction sets: AVX-512 F, BW, DQ and VNNI (quantized_vnni.cc), AVX2, FMA and
// AVX-VNNI, or AVX2 and FMA alone (quantized_avx2_int8.cc: the same bits on 8-lane halves).
enum class Int8ActivationIsa { kNone, kAvx2, kAvxVnni, kAvx512Vnni };
Int8ActivationIsa DetectInt8ActivationIsa();               // the best this CPU runs
std::vector<Int8ActivationIsa> RunnableInt8ActivationIsas();  // every one it runs, best first
// "avx512_vnni", "avx_vnni", "avx2"
const char* Int8ActivationIsaName(Int8ActivationIsa isa);
// Whether this CPU runs any (AVX2 and FMA suffice).
bool Int8ActivationKernelRuns();
// 4-bit weights whose groups are 32 or 64 inputs (a multiple of 64 inputs) or a multiple of 128, and
// 8-bit weights whose groups are a multiple of 128 (one per output channel included).
bool Int8ActivationKernelApplies(const loader::PackedLayout& layout);
// The activation block for a layout the kernel applies to: 32, 64 or 128.
int64_t ActivationBlock(const loader::PackedLayout& layout);

struct Int8Activations {
  int64_t block = 0;
  // [rows, in] codes; for 4-bit weights inside each 64 inputs in the order the kernel unpacks
  // the nibbles (inputs 0-15, 32-47, 16-31, 48-63), for 8-bit ones in input order.
  base::CacheLineVector<int8_t> codes;
  base::CacheLineVector<float> scales;  // [rows, in / block]
  // op.x_group_sums transposed to [groups, rows]: a tile of 8 rows loads a group's 8 at once.
  base::CacheLineVector<float> group_sums_by_group;
};

// Quantizes the rows of op.x in blocks of `block` inputs (32, 64 or 128) and keeps their
// group sums by group: the same codes on both ISAs. Requires `isa` to run here.
void QuantizeActivations(const QuantOperands& op, int64_t block, Int8Activations* out,
                         Int8ActivationIsa isa = DetectInt8ActivationIsa());

// Outputs [n0, n1) of every row of op (op.x unused: the activations are `codes`), by `isa`'s
// kernel (which must run here); the same bits on all.
void QuantizedRowsInt8Activations(const QuantOperands& op, const Int8Activations& codes,
                                  int64_t n0, int64_t n1,
                                  Int8ActivationIsa isa = DetectInt8ActivationIsa());

// quantized_avx2_int8.cc's halves of the two above (QuantizeActivationsAvx2 fills the codes and
// scales that QuantizeActivations sized).
void QuantizeActivationsAvx2(const QuantOperands& op, int64_t block, Int8Activations* out);
void QuantizedRowsAvxVnni(const QuantOperands& op, const Int8Activations& codes, int64_t n0,
                          int64_t n1);
void QuantizedRowsAvx2Int8(const QuantOperands& op, const Int8Activations& codes, int64_t n0,
                           int64_t n1);

}  // namespace placer::model
