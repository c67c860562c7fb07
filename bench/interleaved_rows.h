// Whether storing R weight rows of a 4-bit layer interleaved block by block (one stream, each
// input load shared by R rows) would read closer to the memory floor than the layout placer
// has (one row's blocks after another's). A layout question asked before changing a format
// that the loader, the offload store and every 4-bit kernel share: the kernels here are copies
// of the 4-bit x BF16 decode kernel's inner block (model/quantized_int4_bf16.cc, groups of 128),
// not placer's kernels; each is checked against float64 on a small weight laid out its way
// before anything is timed.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace placer::bench {

// TinyLlama's seven linears of one layer, repeated until `bytes`, packed as 72-byte blocks (an
// 8-byte scale and offset, 64 code bytes), on huge pages. Each pass runs every weight once with
// one variant on SpinningWorkers (tasks of 64 rows, as the decode kernels split them): a plain
// sum of the bytes, 1 row at a time, and 2 and 4 rows interleaved; variants alternate pass by
// pass. {"threads", "bytes", "passes", "largest_relative_error" (the check's, against the sum of
// the terms' magnitudes), "variants": {name: {"gbps": median, "of_sum": {"p25", "median",
// "p75"}}}}, of_sum each pass's GB/s over the sum pass just before it. Throws where a kernel
// computes a wrong output or the CPU lacks AVX512-BF16.
nlohmann::json MeasureInterleavedRows(int64_t bytes, int passes);

}  // namespace placer::bench
