// The few-row matrix products of a decode step, three ways, on the `small` preset's weight
// shapes: placer's SmallBatchLinear, ATen's at::linear / at::addmm (BLAS sgemm) and one gemv
// per row. Where SmallBatchLinearMaxRows' crossovers come from (bench/analysis.md).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace placer::bench {

// For each of `row_counts` input rows (1, 2, 4, ... 256 by default): milliseconds per pass over every weight of one `small`
// step (8 decoder layers and the lm_head, 286 MiB of F32, more than any cache, so each pass
// reads the weights from memory), median of `runs` passes per way, for weights stored
// [out, in] (Llama) and [in, out] (GPT-2's Conv1D); one gemv per row only up to 64 rows.
// Needs AVX2 for placer's way; `force_avx2` measures its AVX2 kernels on an AVX-512 CPU.
nlohmann::json MeasureSmallBatchProducts(
    int runs, bool force_avx2 = false,
    const std::vector<int64_t>& row_counts = {1, 2, 4, 8, 16, 32, 64, 128, 256});

}  // namespace placer::bench
