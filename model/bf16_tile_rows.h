// Inside Bf16TileLinear (bf16_tiles.h): a decode step's few BF16 rows times a weight in AMX
// tile order, on the vector units (AVX512-BF16 `vdpbf16ps`) instead of the tiles.
//
// Why: one row fills one column of a 16-row B tile, so a step reads each weight tile for one
// product; then the tile loads bound it, and they stream weights from memory slower than vector
// loads: a throw-away loop of the tiles kernel's loads and products over 512 MiB read 9-10 GB/s
// on the two vCPUs of an Emerald Rapids VM where a vector sum of the same bytes read 16-17, and
// a ~1.1B BF16 decode step took 189-207 ms on the tiles against 130 here (bench/analysis.md,
// "BF16 decode steps off the AMX tiles"). Past 4 rows the products, not the reads, bound the
// vectors: 8 rows took 185-190 ms here against 123-164 on the tiles.
//
// Order: a tile-order block is 16 outputs x 32 inputs, one output's 32 inputs per 64 bytes, so
// each `vdpbf16ps` multiplies one output's k-block by a row's k-block into 16 lanes (the input
// pairs): per output and row, k-block by k-block in order into its lanes (the instruction's
// rounding), then the 16 lanes added in one fixed order (a register transpose, then lane sums in
// order), plus the bias, one rounding to BF16. That depends only on the output's weight row and
// the input row: a row's result is the same alone or with up to kMostTileVectorRows rows. It is
// not the tiles' order: a row's last float32 bits differ between a call of up to 4 rows here and
// one of more on the tiles (after the BF16 rounding they nearly always agree).
#pragma once

#include <cstdint>

namespace placer::model {

// Rows up to which Bf16TileLinear takes this kernel (`placer-bench-model decode --batch N` of
// the ~1.1B BF16 model, step medians, here against the tiles: 1 row 130 vs 189-207 ms, 2 rows
// 105-112 vs 115-152, 4 rows 117-128 vs 126-132, 8 rows 185-190 vs 123-164); more rows go to the
// tiles, which share each weight tile among 16.
inline constexpr int64_t kMostTileVectorRows = 4;

// AVX-512 F, BW and BF16 (every CPU with AMX-BF16 has them).
bool Bf16TileRowsRun();

struct Bf16TileRowsOperands {
  const uint16_t* x;      // [rows, in] BF16 bits
  const uint16_t* tiles;  // the weight in tile order (bf16_tiles.h), [out / 16, in / 32, 16, 32]
  const float* bias;      // [out] or null
  uint16_t* y;            // [rows, out] BF16 bits
  int64_t rows, in, out;  // rows >= 1
};

// Outputs of tile groups [group_begin, group_end) (4 stripes of 16 outputs each, the last group
// possibly fewer) for every row; more than kMostTileVectorRows rows run in runs of that many,
// each row's bits the same as alone. Requires Bf16TileRowsRun.
void Bf16TileRowsOfGroups(const Bf16TileRowsOperands& op, int64_t group_begin, int64_t group_end);

}  // namespace placer::model
