// Inside QuantizedLinear: float32 rows (the decode steps of an F32 checkpoint under --quantize
// int4, or of a 4-bit GPTQ / AWQ / compressed-tensors one served in F32; on AVX2 alone BF16 rows
// too, widened) times 4-bit packed weights whose groups are multiples of 128 inputs, by integer
// products (AVX512-VNNI's vpdpbusd, or AVX2's vpmaddubsw: quantized_int4_digits_avx2.h) and
// within a small multiple of float32's own error.
//
// Each row is cut into blocks of 128 inputs, and each block becomes a block floating-point
// number: integers v = round(x / t) with the step t = max|x| / (127 · 2^16), so |v| <= 127 · 2^16
// (24 bits) and |x - v · t| <= 2t (the rounding to v, and float32's of x / t), 2^-22 of the
// block's largest input. Each v is three signed bytes, v = d0 · 2^16 + d1 · 2^8 + d2, which
// the integer products multiply with the codes exactly; the block's dot product (S0 · 2^16 +
// S1 · 2^8 + S2) is rounded to a float, times s · t.
// Against float64, an output is off by at most sum(30 |s| t) over its inputs (the blocks'
// representation) plus float32 roundings of the terms (tested). Weight-only int4 stays
// weight-only: nothing is rounded to 8 bits (that is --quantize-activations int8,
// quantized_vnni.h). The AVX-512 float kernel (quantized_int4_quads.h) spends a permute, a shift
// and an fma on every 16 weights; this one four instructions per 128 codes and six vpdpbusd per
// 128 inputs and row, and its codes are unpacked once for up to 4 rows.
//
// Each output is summed in one fixed order for its row alone: per block in order, fma(value,
// s · t, acc) into 16 lanes (AVX2: 8), the lanes summed in _mm512_reduce_add_ps's order
// (HorizontalSum256's), plus the offsets' share m_g · (sum of x over g) group by group, plus the
// bias: the same bits whatever the other rows of the call or the thread count (batch
// invariance); the two forms' bits differ from each other. An input that is NaN or infinite
// makes the row's outputs NaN (the float kernel's would be NaN or infinite); a block whose
// largest input is below ~2^-105 (a subnormal step) keeps float32's absolute error near zero.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/input_digits.h"
#include "model/quantized_kernels.h"

namespace placer::model {

// The forms of the kernel, best first where both run.
enum class Int4DigitsIsa { kNone, kAvx2, kAvx512Vnni };
Int4DigitsIsa DetectInt4DigitsIsa();                  // the best this CPU runs (checked once)
std::vector<Int4DigitsIsa> RunnableInt4DigitsIsas();  // every one it runs, best first
const char* Int4DigitsIsaName(Int4DigitsIsa isa);
// Some form runs here (AVX2 and FMA, or AVX-512 F, BW, DQ and VNNI).
bool Int4DigitsKernelRuns();
// AVX-512 F, BW, DQ and VNNI: this kernel's AVX-512 form and the other VNNI digit kernels
// (quantized_int4_digit_chunks.h, quantized_int8_digits.h).
bool DigitsVnniRuns();
// 4-bit weights in groups of a multiple of 128 inputs (128, 256, ..., one per output channel).
bool Int4DigitsKernelApplies(const loader::PackedLayout& layout);

// Per row and block, per 64-input span, the digits d0, d1, d2 (64 bytes each) in the order the
// codes unpack (the same in both forms).
using Int4Digits = RowDigits<int8_t>;

// The digits of every row of op.x, the same bits in either form. Requires Int4DigitsKernelRuns
// and an applying layout.
void DigitsOfRows(const QuantOperands& op, Int4Digits* out);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `digits`) in form `isa`
// (runnable here).
void QuantizedRowsInt4Digits(const QuantOperands& op, const Int4Digits& digits, int64_t n0,
                             int64_t n1, Int4DigitsIsa isa = DetectInt4DigitsIsa());

}  // namespace placer::model
