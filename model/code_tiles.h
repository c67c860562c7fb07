// The A side of the AMX-INT8 prompt-chunk kernels (digit_tiles.*, int8_activation_tiles.*): a
// call's packed weight codes laid out as bytes in A tiles, 32 outputs a pass, up to 128
// outputs at a time, with their blocks' scales and offsets, in a per-thread buffer that also
// holds the kernels' float32 sums.
#pragma once

#include <cstdint>
#include <vector>

#include "base/cache_line_vector.h"
#include "model/quantized_kernels.h"

namespace placer::model {

inline constexpr int64_t kCodeTileOutputs = 16;  // outputs per A tile (a stripe)
inline constexpr int64_t kCodeTileInputs = 64;   // codes per A tile row (a k-block)
inline constexpr int64_t kCodeTileBytes = kCodeTileOutputs * kCodeTileInputs;
inline constexpr int64_t kCodePassOutputs = 2 * kCodeTileOutputs;   // outputs per pass
inline constexpr int64_t kMostCodeOutputs = 4 * kCodePassOutputs;  // outputs laid out at once

// Where a 4-bit k-block's codes go in its A tile row: in input order (digit_tiles), or in the
// order the VNNI kernels keep int8 activation codes (inputs 0-15, 32-47, 16-31, 48-63).
// 8-bit codes are copied as stored (input order) either way.
enum class NibbleOrder { kInputs, kVnni };

struct CodeTiles {
  base::CacheLineVector<uint8_t> a;              // [passes][in / 64][2][16][64]: A tiles
  base::CacheLineVector<float> scales, offsets;  // [passes · 32][groups]: blocks' s and m
  base::CacheLineVector<float> sums;             // float32 sums, [passes · 32][columns]
};

// The A tile of pass `pass`, k-block `kb` and stripe `stripe` (0 or 1) in tiles.a.
inline const uint8_t* CodeTile(const CodeTiles& tiles, int64_t k_blocks, int64_t pass, int64_t kb,
                               int64_t stripe) {
  return tiles.a.data() + ((pass * k_blocks + kb) * 2 + stripe) * kCodeTileBytes;
}

// Outputs [s0, s0 + count) of op (count <= kMostCodeOutputs; 4-bit or 8-bit codes, groups of a
// multiple of 64 inputs) laid out into tiles.a, their blocks' s and m into tiles.scales and
// tiles.offsets; the outputs past count up to a whole pass as zero codes and zero s and m.
// Returns the passes. Requires AVX-512F/BW.
int64_t LayOutCodeTiles(const QuantOperands& op, int64_t s0, int64_t count, NibbleOrder order,
                        CodeTiles& tiles);

// This thread's CodeTiles, reused by its next call.
CodeTiles& ThreadCodeTiles();

// Gives back a long prompt's buffers (kept ones serve the next call).
void TrimCodeTiles(CodeTiles& tiles);

}  // namespace placer::model
