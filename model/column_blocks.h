// Prompt-chunk inputs as column blocks: the layout both prompt-chunk kernels (float32 in
// prompt_chunk_linear.cc, BF16 pairs in prompt_chunk_bf16.cc) broadcast weights against.
//
// A chunk of `rows` input rows ([rows, in], row-major) becomes ceil(rows / 64) blocks; block b
// holds rows [64 b, 64 b + 64) as [units][64] 32-bit units: unit u of every row in turn, so that
// four aligned vector loads give one unit of 64 rows. Float32 blocks in the groups-of-8 layout
// (for the AVX2 tiles, prompt_chunk_avx2.h) hold the same rows as 8 groups of 8 rows, group g
// [in][8] at g * in * 8: a tile's vector of 8 rows is then one contiguous stream, where 8 of
// every 64 floats left half of each cache line unused. A unit is one float32, or one pair of
// consecutive BF16 values (the first in the low half; an odd `in`'s last pair has zero bits in
// its high half). Rows past `rows` in the last block are zeros, but for AVX2's groups of 8 rows
// that hold none of x's rows: those are not written. Nothing past a row of x is read.
#pragma once

#include <cstdint>

namespace placer::model {

// Input rows per column block: 4 vectors of 16.
inline constexpr int64_t kColumnBlockRows = 64;

// Which arrangement of float32 blocks is written: the 64-row one (AVX-512F's tiles) or the groups
// of 8 rows (AVX2's). The caller names the one its tiles read, so the writer and the reader
// cannot pick differently.
enum class FloatColumnBlocks { kRowsOf64, kGroupsOf8 };

// The arrangement the prompt-chunk tiles of `isa_has_avx512f`'s CPU read.
inline FloatColumnBlocks FloatColumnBlocksFor(bool isa_has_avx512f) {
  return isa_has_avx512f ? FloatColumnBlocks::kRowsOf64 : FloatColumnBlocks::kGroupsOf8;
}

// Writes every block of x (float32, [rows, in]) to out ([blocks][in][64] floats, 64-byte
// aligned) in `layout`, spread over SpinningWorkers. kRowsOf64 needs AVX-512F, kGroupsOf8 AVX2
// (checked: a c10::Error names what is missing).
void FloatRowsToColumnBlocks(const float* x, int64_t rows, int64_t in, float* out,
                             FloatColumnBlocks layout);

// Writes every block of x (BF16 bits, [rows, in]) to out ([blocks][(in + 1) / 2][64] pairs,
// 64-byte aligned), spread over SpinningWorkers. Needs AVX-512F and AVX-512BW.
void Bf16RowsToColumnBlocks(const uint16_t* x, int64_t rows, int64_t in, uint32_t* out);

}  // namespace placer::model
