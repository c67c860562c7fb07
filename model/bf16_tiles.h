// BF16 linear weights in AMX tile order, and the products that read them with `tdpbf16ps`.
//
// On a CPU with AMX a decode step's rows can share each weight read for about the price of one
// row: one `tdpbf16ps` multiplies 16 outputs x 32 inputs by 16 rows, where the vector kernels
// (small_batch_bf16.h) spend a `vdpbf16ps` per row for every 32 weights and are bound by that
// instruction past ~8 rows. The weight side of a tile is 16 rows of 64 contiguous bytes; read
// in place from an [out, in] weight that is 16 rows far apart, which the hardware prefetchers
// do not follow, so one row ran slower than on the vectors (bench/analysis.md, "AMX for BF16
// decode rows"). In tile order every block the kernel loads is contiguous and a task's blocks
// are one stream.
//
// Tile order of a weight [out, in] (out a multiple of 16, in a multiple of 32): stripes of 16
// outputs, in groups of 4 stripes (the last group may hold fewer); a group's blocks of 16
// outputs x 32 inputs lie k-block by k-block, the group's stripes in order within each, each
// block 16 rows of 32 inputs (1 KiB). The tensor is BF16 [out / 16, in / 32, 16, 32], a shape
// no plain weight has, so the form is read off the tensor (IsBf16TileWeight).
//
// Up to kMostTileVectorRows rows (a decode step) are multiplied on the vector units instead
// (bf16_tile_rows.h): one row filled one column of a tile, and the tile loads streamed the
// weights slower than vector loads do. On the tiles, each output is one chain over the inputs
// in order, in float32 (the instruction's own order and rounding), then + bias and one rounding
// to BF16: it depends only on its weight row and input row, so a row's result is the same in
// any call of kMostTileVectorRows + 1 to kMostTileRows rows (a prompt chunk, or a step of more
// streams); on the vectors, the same in any call of up to kMostTileVectorRows. The two float32
// sums (and the vector kernels' of the weights as mapped) differ in their last bits; after the
// BF16 rounding the outputs nearly always agree.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace placer::model {

// The CPU has AMX-TILE and AMX-BF16 and Linux lets this process use the tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM, asked once). PLACER_BF16_TILES=0 in the environment says
// no (the vector kernels on zero-copy weights; for measuring one against the other).
bool Bf16TilesRun();

// Whether a weight [out, in] has a tile order.
inline bool Bf16TileShapeFits(int64_t out, int64_t in) {
  return out > 0 && in > 0 && out % 16 == 0 && in % 32 == 0;
}

// A contiguous BF16 CPU tensor [out, in] whose shape fits, in tile order (a new tensor, in
// huge pages when large: loader/huge_page_tensor.h), packed on the calling thread and the
// SpinningWorkers. Requires those.
at::Tensor PackBf16Tiles(const at::Tensor& weight);
// The inverse: [out, in] BF16, contiguous (tests, and prompt chunks where that is faster).
at::Tensor UnpackBf16Tiles(const at::Tensor& tiles);

// A CPU BF16 tensor in tile order (PackBf16Tiles' shape, contiguous).
bool IsBf16TileWeight(const at::Tensor& tensor);

// Rows up to which Bf16TileLinear runs on the tiles; past them (long prompt chunks) it unpacks
// the weight into a reused buffer for ATen's BF16 GEMM (oneDNN), which reuses each weight
// across more rows (`placer-bench-model products`: 20 vs 17 ms at 64 rows, 68 vs 29 at 256).
inline constexpr int64_t kMostTileRows = 64;

// x [..., in] (BF16, CPU) @ weight^T + bias (undefined, or BF16 / float32 [out]) -> BF16
// [..., out], any number of rows (up to kMostTileVectorRows on the vectors, then 16 at a time
// on the tiles up to kMostTileRows). Requires Bf16TilesRun and IsBf16TileWeight; other
// operands are refused with a c10::Error naming them.
at::Tensor Bf16TileLinear(const at::Tensor& x, const at::Tensor& tiles, const at::Tensor& bias);
// The same with every row count up to kMostTileRows on the tiles (bench, tests).
at::Tensor Bf16TileLinearOnTiles(const at::Tensor& x, const at::Tensor& tiles,
                                 const at::Tensor& bias);

}  // namespace placer::model
