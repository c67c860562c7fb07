// Inside QuantizedLinear (AVX512-VNNI): float32 rows, and BF16 rows widened to float32 (the
// decode steps of a checkpoint under --quantize int8 or an int8 --quantize-lm-head, or of an
// 8-bit GPTQ / compressed-tensors one) times 8-bit packed weights whose groups are multiples of
// 128 inputs (one per output channel included, where `in` is a multiple of 128), by VNNI's
// integer products, within a small multiple of float32's own error.
//
// Each row's blocks of 128 inputs are the three-digit numbers of quantized_int4_digits.h
// (input_digits.h: v = round(x / t), t = max|x| / (127 · 2^16), |x - v · t| <= 2t), here as the
// three unsigned bytes of v + 2^23, so that vpdpbusd multiplies them with the stored signed
// codes q as they are: sum q (v + 2^23) = sum q v + 2^23 · sum q, and the code sum, one
// vpdpbusd of ones per 64 codes, is taken off the top digit's lanes before it is read. A block
// of scale s and offset m contributes s · t · sum q v + m · X (X the group's input sum).
// Against float64, an output is off by at most sum(256 |s| t) over its inputs plus float32
// roundings of the terms (tested). The float kernel spends a conversion and an fma on every
// weight, the vdpbf16ps kernel (quantized_int8_bf16.h) four shifts, four vpternlogd and four
// vdpbf16ps on 64; this one one vpdpbusd of ones per 64 codes and three per 64 inputs and row.
//
// Each output is summed in one fixed order for its row alone (per block in order, fma(value,
// s · t, acc) into 16 lanes, the lanes summed in a fixed order, plus the offsets' share group by
// group, plus the bias): the same bits whatever the other rows of the call or the thread count
// (batch invariance). A non-finite input makes its row's outputs NaN.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/input_digits.h"
#include "model/quantized_kernels.h"

namespace placer::model {

// AVX-512 F, BW, DQ and VNNI.
bool Int8DigitsKernelRuns();
// 8-bit weights in groups of a multiple of 128 inputs (128, 256, ..., one per output channel).
bool Int8DigitsKernelApplies(const loader::PackedLayout& layout);

// Per row and block, per 64-input span, the top, middle and low bytes of v + 2^23 (64 bytes
// each, in input order).
using Int8Digits = RowDigits<uint8_t>;

// The digits of every row of op.x. Requires Int8DigitsKernelRuns and an applying layout.
void Int8DigitsOfRows(const QuantOperands& op, Int8Digits* out);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `digits`).
void QuantizedRowsInt8Digits(const QuantOperands& op, const Int8Digits& digits, int64_t n0,
                             int64_t n1);

}  // namespace placer::model
