// Inside QuantizedLinear (AVX512-VNNI): prompt chunks of float32 rows (more rows than
// QuantizedLinearMaxRows gives the decode kernels, and not 33-128 rows, which the F32
// prompt-chunk kernel takes faster) times 4-bit packed weights whose groups are
// multiples of 128 inputs, by vpdpbusd on the same three-digit inputs as quantized_int4_digits.h
// and within the same bound.
//
// Why: before, such a chunk unpacked its weight rows to float32 for the F32 prompt-chunk
// kernel, 16 multiply-adds per FMA. The decode kernel (quantized_int4_digits.h) puts a dot
// product's inputs in the lanes and pays a conversion and two fmas per block and row on top of
// its six vpdpbusd, no faster than the FMAs at 16 rows. Here the chunk's rows are the lanes, as
// in the F32 prompt-chunk kernel: each vpdpbusd multiplies four codes of one output (broadcast)
// with four digits of 16 rows, so a tile of 8 outputs x 48 rows keeps 24 accumulators busy and
// a block's sums become floats once per 96 vpdpbusd instead of once per 6.
//
// The digits and steps are DigitsOfRows', so each input is represented within 2t as there. Per
// block, (S0 · 2^8 + S1) is summed exactly in int32 (|S0| · 2^8 < 2^26), rounded once to a
// float and scaled by 2^8 · s · t; S2 · s · t is added after it; the offsets' share m_g · (sum
// of x over g) is added at the start of each group, the bias at the end. That is one fixed
// order per output and row, whatever the other rows of the chunk or the thread count (batch
// invariance among chunks); it is not the decode kernel's order, so a row's last bits differ
// between a prompt chunk and a decode step, as they did with the F32 prompt-chunk kernel.
// Non-finite inputs make their row's outputs NaN, as in the decode kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// The chunk's inputs in the kernel's order: per 16 rows (a row vector; the last one padded with
// zero digits), block and digit, 32 int32 lanes-of-four-digits for each of the 16 rows.
struct Int4DigitChunkInputs {
  base::CacheLineVector<int32_t> quads;       // [row_vectors, blocks, 3, 32, 16]
  base::CacheLineVector<float> steps;         // [row_vectors, blocks, 16]: each row's block step t
  base::CacheLineVector<float> group_sums;    // [row_vectors, groups, 16]
  int64_t row_vectors = 0;
};

// The digits of every row of op.x arranged for QuantizedChunkRowsInt4Digits. Requires
// DigitsVnniRuns and a layout Int4DigitsKernelApplies to.
void ArrangeDigitChunkInputs(const QuantOperands& op, Int4DigitChunkInputs* out);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `inputs`).
void QuantizedChunkRowsInt4Digits(const QuantOperands& op, const Int4DigitChunkInputs& inputs,
                                  int64_t n0, int64_t n1);

// This thread's arranged inputs, reused by its next call; a long prompt's are given back.
Int4DigitChunkInputs& DigitChunkInputsBuffer();

}  // namespace placer::model
