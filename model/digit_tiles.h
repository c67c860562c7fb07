// Inside QuantizedLinear (AMX-INT8): prompt chunks of float32 rows (past QuantizedLinearMaxRows)
// times 4-bit or 8-bit packed weights in groups of a multiple of 128 inputs, each input as the
// three digits of the decode kernel's 24-bit integers (quantized_int4_digits.h), multiplied by
// `tdpbusd` (4-bit codes, 0-15) or `tdpbssd` (8-bit codes, signed).
//
// Why: the exact BF16 tiles (quantized_tiles.h) take three `tdpbf16ps` per 32 inputs, one per
// BF16 part of each input; a tile product on int8 takes 64 inputs, so three digits cost half
// the products, and the codes laid out as bytes half the bytes. On AVX512-VNNI CPUs without
// AMX, F32 prompt chunks of 4-bit groups of 128s already take these digits
// (quantized_int4_digit_chunks.h), with the same bound.
//
// Arithmetic: each row is cut into blocks of 128 inputs, each block's inputs become integers
// v = round(x / t), t = max|x| / (127 · 2^16), and each v three signed bytes v = d0 · 2^16 +
// d1 · 2^8 + d2 (quantized_int4_digits.h's representation: |x - v · t| <= 2t). A tile product
// sums a block's q · d_j exactly in int32 (per digit), then per output and row, block by block
// in order, fma(S0 · 2^16 + S1 · 2^8 + S2 (two float fmas), s · t, acc), and at each group's
// first block fma(m, X, acc) (X the float group sum of the inputs), the bias last. Against
// float64 an output is off by at most sum(2 · max|q| · |s| · t) over its inputs (30 |s| t for
// 4-bit codes, 256 |s| t for 8-bit) plus float32 roundings of the terms. A NaN or an infinite
// input makes its row's outputs NaN.
//
// Order: each sum depends only on its row's digits, so a row's result is the same alone or in
// any chunk and at any thread count (batch invariance among chunks). Not the decode kernels'
// order: a row's last bits differ between a prompt chunk and a decode step.
#pragma once

#include <cstdint>
#include <vector>

#include "base/cache_line_vector.h"
#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"

namespace placer::model {

// AMX-TILE and AMX-INT8 usable (amx_tiles.h), AVX-512 F/BW/DQ (the digits), and
// PLACER_DIGIT_TILES is not "0" (for measuring the BF16 tiles in its place).
bool DigitTilesRun();

// 4-bit and 8-bit weights in groups of a multiple of 128 inputs (128, 256, ..., one per row).
bool DigitTilesApply(const loader::PackedLayout& layout);

// Outputs per task of the parallel loop (RunPackedProducts): a prompt chunk's task of 64
// outputs of a 2048-input weight is ~1500 tile products, and the loop's last task left the
// other thread waiting (in-process prefill of the small preset ~1.5 % faster at 32).
inline constexpr int64_t kDigitTileOutputsPerTask = 32;

// A chunk's digits in the tiles' order: rows in tiles of 16 (an even number of tiles, zeros
// past the last row), each row tile's k-blocks of 64 inputs as three B tiles (one per digit,
// [16 quads][16 rows][4 digits]); each row tile's block steps and group sums by 16 rows.
struct DigitTileInputs {
  base::CacheLineVector<int8_t> digits;     // [row_tiles, in / 64, 3, 16, 16, 4]
  base::CacheLineVector<float> steps;       // [row_tiles, in / 128, 16]
  base::CacheLineVector<float> group_sums;  // [row_tiles, groups, 16]
  int64_t row_tiles = 0;
};

// op's rows as digits, arranged for the tiles, by row tiles on SpinningWorkers (on the calling
// thread where they are busy). Requires DigitTilesRun and an applying layout.
void ArrangeDigitTileInputs(const QuantOperands& op, DigitTileInputs* inputs);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `inputs`).
// Any range works; each output's sums are the same whatever range holds it.
void QuantizedChunkRowsDigitTiles(const QuantOperands& op, const DigitTileInputs& inputs,
                                  int64_t n0, int64_t n1);

// This thread's arranged inputs, reused by its next call; a long prompt's are given back.
DigitTileInputs& DigitTileInputsBuffer();

}  // namespace placer::model
