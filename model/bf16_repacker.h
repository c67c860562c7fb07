// Which layout a BF16 model's linear weights take in host memory, chosen once for the CPU:
// AMX tile order where AMX runs (bf16_tiles.h), else pair order where AVX512-BF16 runs
// (bf16_pairs.h), else the weights stay as bound (the [out, in] kernels of small_batch_bf16.h).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "runtime/repack_resident_weights_hook.h"

namespace placer::model {

// The repacker runtime::BlockRunner applies on each block's first call, or null.
runtime::WeightRepacker Bf16WeightRepacker(at::ScalarType compute);

// One line for the start log saying what Bf16WeightRepacker does for a BF16 compute dtype and
// how to turn it off; empty when it does nothing.
std::string Bf16WeightLayoutNote();

}  // namespace placer::model
