// How close the packed-weight kernels come to reading their bytes: a decode step's one-row
// products over the ~1.1B model's layer shapes, well past the L3, each pass beside a plain read
// of as many bytes. The in-process read floor (bench/run's decode section) adds the step's
// other work to this; here the kernels stand alone, so a change to one shows without the noise
// of a whole step.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace placer::bench {

// Whose linear shapes a pass multiplies: TinyLlama's seven of a layer (the default), the small
// preset's seven, or the small preset's lm_head alone ([32000, 768]: a third of its decode
// step's bytes under --quantize int4).
enum class PackedStreamShapes { kTinyLlama, kSmall, kSmallLmHead };
const char* PackedStreamShapesName(PackedStreamShapes shapes);

// For each scheme this CPU runs (int4 and int8 weights, --quantize's groups; BF16 rows, and
// BF16 rows under --quantize-activations int8): packed weights of `shapes` (in 2 MiB pages, as
// the weight reader holds cpu-placed ones: loader::InHugePageArena), layer after layer
// until they reach `bytes`, each multiplied by one BF16 row (float32 with `float32_rows`) through
// QuantizedLinear (the path a decode step takes), `passes` times; after each pass one read of
// as many bytes (ReadProbe). Returns {"threads", "passes", "schemes": {name: {"bytes",
// "pass_ms" (median), "kernel_gbps" (median), "read_gbps" (median of the reads), "of_read"
// {"p25", "median", "p75"} of read time / pass time, pass by pass}}}, "shapes" and "rows".
nlohmann::json MeasurePackedStream(int64_t bytes, int passes,
                                   PackedStreamShapes shapes = PackedStreamShapes::kTinyLlama,
                                   bool float32_rows = false);

}  // namespace placer::bench
