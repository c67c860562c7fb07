// Inside QuantizedLinear (AMX): prompt chunks of float32 rows (past QuantizedLinearMaxRows)
// times 4-bit or 8-bit packed weights in groups of any multiple of 32 inputs, by `tdpbf16ps`;
// BF16 rows too, with one part each (a BF16 input is its own hi), their results rounded to BF16
// once.
//
// Why: on AVX-512 the F32 prompt-chunk kernels are bound by their FMAs (16 multiply-adds each;
// ~2/3 of the small preset's int4 prefill was that one loop), and 8-bit chunks unpacked the
// whole weight for a dense GEMM. One tdpbf16ps multiplies a tile of 16 outputs x 32 inputs by
// 16 rows: 8192 multiply-adds. The tiles multiply BF16 numbers only, and both sides are made
// exact in BF16:
//   - a code q (0-15, or -128-127) is a BF16 number exactly; a block's 16 outputs x 32 codes are
//     unpacked into one A tile (4-bit: a table permute per 32 codes, in the order the nibbles
//     are stored; 8-bit: widened to float32, whose upper halves are the BF16 numbers);
//   - a float32 input x is exactly hi + mid + lo, three BF16 numbers (hi its top 8 significant
//     bits, mid the next 8 of what is left, lo the rest, at most 8 bits), so the chunk's rows
//     become three B tiles per 32 inputs and 16 rows, and three tdpbf16ps give sum q·x with
//     every product exact and the sums in float32 (the instruction's rounding, to nearest even).
// A span of a block of scale s (the group, or each 128 inputs of a group of 128s) contributes
// s · (sum of q·x over the span), and the block m · X at its end, X the group's input sum in
// float32 (RunPackedProduct's, one fixed order); the same weight fma(q, s, m) the other kernels
// multiply, the sum taken in another order.
//
// Error: the instruction adds each product into its float32 sum one at a time, so a span's sum
// of q·x is 3·span exact products added in sequence (the F32 kernels spread theirs over 16
// lanes): within 3·span float32 roundings of the sum of |s·q·x|, plus one rounding of the
// output's running sum per span (in/128 of them for a whole-row 8-bit group), and group of
// |m|·sum|x| for the offsets' share. With inputs of one scale that is as close to float64 as
// the F32 kernels (tested at their tolerance); an input 1000 times its group's others makes
// every later addition round at its scale (tested against this bound). Inputs below ~2^-110 in
// magnitude lose their lowest part (AMX reads BF16 denormals as zero). Non-finite inputs make
// their row's outputs NaN (hi is infinite, mid the difference of infinities).
//
// Order: per output and row, span by span fma(s, tile sums, acc), fma(m, X, acc) at each
// group's end, the bias last; each tile sum depends only on that row's inputs, so a row's
// result is the same alone or in any chunk and at any thread count (batch invariance among
// chunks). Not the decode kernels' order: a row's last bits differ between a prompt chunk and a
// decode step, as with the other chunk kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// BF16 rows up to which QuantizedLinear gives prompt chunks to this kernel (one part per input);
// longer BF16 chunks unpack the weight for oneDNN's GEMM, which reuses it across more rows.
inline constexpr int64_t kMostQuantizedTileBf16Rows = 64;

// AMX tiles usable (amx_tiles.h) and AVX-512 F/BW (the unpacking and the inputs' split), and
// PLACER_QUANTIZED_TILES is not "0" (for measuring the chunk kernels this one replaced).
bool QuantizedTilesKernelRuns();

// 4-bit and 8-bit weights in groups of any multiple of 32 inputs (every 4-bit layout; 8-bit ones
// whose inputs and groups are multiples of 32).
bool QuantizedTilesKernelApplies(const loader::PackedLayout& layout);

// The chunk's inputs in the tiles' order: rows in tiles of 16 (an even number of tiles, zeros
// past the last row), each row tile's k-blocks of 32 inputs, each block's three parts as a B tile
// ([16 pairs of inputs][16 rows], each pair two BF16 values); each row tile's group sums
// [groups][16].
struct QuantizedTileInputs {
  base::CacheLineVector<uint32_t> pairs;       // [row_tiles, in / 32, parts, 16, 16]
  base::CacheLineVector<float> group_sums;     // [row_tiles, groups, 16]
  int64_t row_tiles = 0;
  int64_t parts = 3;                 // hi, mid, lo; 1 for BF16 rows (their own hi)
};

// Every row of op.x arranged for QuantizedChunkRowsTiles: three parts, or with `bf16_rows`
// (op.x widened from BF16, so each input is one BF16 number) one. Requires QuantizedTilesKernelRuns
// and a layout QuantizedTilesKernelApplies to.
void ArrangeQuantizedTileInputs(const QuantOperands& op, bool bf16_rows, QuantizedTileInputs* inputs);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `inputs`).
void QuantizedChunkRowsTiles(const QuantOperands& op, const QuantizedTileInputs& inputs, int64_t n0,
                                 int64_t n1);

// This thread's arranged inputs, reused by its next call; a long prompt's are given back.
QuantizedTileInputs& QuantizedTileInputsBuffer();

}  // namespace placer::model
