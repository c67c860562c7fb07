// Where the AMX prompt-chunk kernels (quantized_tiles.*, digit_tiles.*, int8_activation_tiles.*) leave
// their results: float32 sums by output, each output's sums of every chunk row side by side
// ([output][row], as the tiles' C columns hold them), written to y [row][output] with the bias.
#pragma once

#include <cstdint>

#include "model/quantized_kernels.h"

namespace placer::model {

// y[r][s0 + i] = sums[i · columns + r] + bias[s0 + i] for every row r < op.rows and i < count
// (columns >= op.rows rounded up to 16), 16 outputs x 16 rows at a time through a register
// transpose: a float at a time, strided by `out`, took a third as long as the products.
// Requires AVX-512F.
void StoreTileOutputSums(const QuantOperands& op, const float* sums, int64_t columns, int64_t s0,
                         int64_t count);

}  // namespace placer::model
