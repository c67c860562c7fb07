// The AVX2 form of the 4-bit x three-digit kernel (quantized_int4_digits.h states what both
// forms promise; QuantizedRowsInt4Digits picks one), for CPUs without AVX512-VNNI.
//
// Why: there the float kernel (quantized_kernels.cc) widens every code to a float32 lane and
// spends a conversion and an fma on each 8 weights: ~14 instructions per 32 weights, about
// 6 GB/s of 4-bit codes per core on a Zen 3 EPYC, half of what two cores read, so a decode
// step's 4-bit products were bound by instructions, not memory. Here vpmaddubsw multiplies 32
// codes (unsigned, 0-15) with 32 digits (signed, within [-127, 127]) and adds them in pairs,
// exactly (|pair| <= 2 · 15 · 127 = 3810): per 128 codes and row, twelve vpmaddubsw, nine
// 16-bit adds (|sum| <= 4 · 3810 < 2^15), three vpmaddwd into 32-bit lanes, one conversion and
// one fma, and six instructions per 128 codes to unpack them, shared by the rows of a pass (up to 4).
// Per block and lane, (S0 · 2^8 + S1) · 2^8 + S2 is summed exactly in int32 (each lane holds 16
// inputs: |S_j| <= 16 · 15 · 127 = 30480, and 30480 · (2^16 + 2^8 + 1) < 2^31), rounded once to a
// float and multiplied by s · t.
#pragma once

#include <cstdint>

#include "model/quantized_int4_digits.h"

namespace placer::model {

// AVX2 and FMA.
bool Int4DigitsAvx2Runs();

// One row's block of kDigitBlock inputs at x: its digits in DigitsOfRows' layout and order, and
// its step; the same bits as the AVX-512 form's.
void DigitsOfBlockAvx2(const float* x, float group_sum, int8_t* digits, float* step);

// Outputs [n0, n1) of every row of op from `digits` (8 lanes per row, summed in
// HorizontalSum256's order, plus the offsets' share, plus the bias).
void QuantizedRowsInt4DigitsAvx2(const QuantOperands& op, const Int4Digits& digits, int64_t n0,
                                 int64_t n1);

}  // namespace placer::model
