// Which layout a BF16 model's linear weights take in host memory, chosen once for the CPU:
// AMX tile order where AMX runs (bf16_tiles.h), else pair order where AVX512-BF16 runs
// (bf16_pairs.h), else the weights stay as bound (the [out, in] kernels of small_batch_bf16.h).
// runtime::BlockRunner applies the repacker on each host-memory block's first call
// (runtime::RepackResidentWeightsHook): the [out, in] BF16 weights of linears (decoder layers'
// and an untied lm_head's) whose shape the layout fits; norms, GPT-2's [in, out] Conv1D
// weights and anything else stay as bound.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "runtime/repack_resident_weights_hook.h"

namespace placer::model {

// The repacker for `compute`: the tiles', else the pairs', else null (F32 and F16 compute,
// CPUs with neither).
runtime::WeightRepacker Bf16WeightRepacker(at::ScalarType compute);

// Each layout's own, null where it does not run or `compute` is not BF16 (tests, the bench).
runtime::WeightRepacker Bf16TileRepacker(at::ScalarType compute);
runtime::WeightRepacker Bf16PairRepacker(at::ScalarType compute);

// One line for the start log saying what Bf16WeightRepacker does for a BF16 compute dtype and
// how to turn it off; empty when it does nothing.
std::string Bf16WeightLayoutNote();

}  // namespace placer::model
