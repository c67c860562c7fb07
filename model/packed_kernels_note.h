// PackedKernelsNote: the start log's line on which kernels multiply packed (quantized) host
// weights on this CPU, so an operator reads from the log what `placer-bench-model
// quantized-products` would measure there.
#pragma once

#include <string>

#include "loader/dtype.h"

namespace placer::model {

// For rows of `compute` (F32 or BF16), e.g. "packed kernels (F32 rows): AVX512-VNNI for 4-bit
// weights in groups of 128s (...); others: the AVX-512 float kernels"; "" for another dtype
// (packed weights on a GPU are dequantized there).
std::string PackedKernelsNote(loader::DType compute);

}  // namespace placer::model
