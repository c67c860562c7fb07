// Inside QuantizedLinear under --quantize-activations int8 (AMX): prompt chunks of more than
// kMostInt8ActivationVectorRows rows times 4- or 8-bit packed weights on AMX-INT8, `tdpbusd`
// (unsigned 4-bit codes x signed activation codes) and `tdpbssd` (signed 8-bit codes), as
// llama.cpp multiplies Q4_0 / Q8_0 prompt chunks on the tiles.
//
// Why: the VNNI kernel (quantized_vnni.h) makes 64 multiply-adds an instruction; one tile
// product makes 16 outputs x 16 rows x 64 inputs. Against llama.cpp with its AMX kernels the
// small preset's int4a8 / int8a8 64-token prefill read 0.86x / 0.64x (bench/analysis.md).
//
// Arithmetic: the activations are QuantizeActivations' (the VNNI kernel's codes and scales:
// blocks of 64 or 128 inputs, d = max|x| / 127). A tile product sums a block's products in
// int32, exactly (|sum| < 2^24, so its float is exact too); then per output and row, block by
// block in order, fma(float(sum), s_g · d_b, acc), and at each group's first block fma(m_g,
// X_g, acc) (X_g the float group sum of the inputs), the bias last. Each sum depends only on
// its row's codes, so a row's result is the same alone or in any chunk and at any thread count
// (batch invariance among chunks). It is not the VNNI kernel's order (that one sums 16 lanes
// in float): a row's last bits differ between a prompt chunk here and a decode step, as with
// the other chunk kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_kernels.h"
#include "model/quantized_vnni.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// Rows up to which int8-activation products stay on the VNNI kernel: decode steps of up to 16
// streams keep the decode kernel's bits, as the other chunk kernels' thresholds do.
inline constexpr int64_t kMostInt8ActivationVectorRows = 16;

// AMX-TILE and AMX-INT8 usable (amx_tiles.h), AVX-512 F/BW/VNNI (the activations' codes), and
// PLACER_INT8_ACTIVATION_TILES is not "0" (for measuring the VNNI kernel in its place).
bool Int8ActivationTilesRun();

// Layouts the VNNI kernel takes whose activation blocks are 64 or 128 inputs (4-bit groups of
// 32 have blocks of 32: they stay on the VNNI kernel).
bool Int8ActivationTilesApply(const loader::PackedLayout& layout);

// A chunk's activation codes in the tiles' order: rows in tiles of 16 (an even number of
// tiles, zeros past the last row), each row tile's k-blocks of 64 codes as one B tile
// ([16 quads][16 rows][4 codes]); each row tile's block scales and group sums by 16 rows.
struct Int8ActivationTileInputs {
  base::CacheLineVector<int8_t> quads;     // [row_tiles, in / 64, 16, 16, 4]
  base::CacheLineVector<float> scales;     // [row_tiles, in / block, 16]
  base::CacheLineVector<float> group_sums; // [row_tiles, groups, 16]
  int64_t row_tiles = 0;
  int64_t block = 0;
};

// op's rows quantized as the VNNI kernel quantizes them, then arranged for the tiles.
// Requires Int8ActivationTilesRun and a layout Int8ActivationTilesApply takes.
void ArrangeInt8ActivationTileInputs(const QuantOperands& op, Int8ActivationTileInputs* inputs);

// Outputs [n0, n1) of every row of op (op.x unused: the inputs are `inputs`).
void QuantizedChunkRowsInt8ActivationTiles(const QuantOperands& op,
                                           const Int8ActivationTileInputs& inputs, int64_t n0,
                                           int64_t n1);

// This thread's arranged inputs, reused by its next call; a long prompt's are given back.
Int8ActivationTileInputs& Int8ActivationTileInputsBuffer();

}  // namespace placer::model
