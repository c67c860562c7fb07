// Repacks one pre-quantized linear weight (its parts: loader/prequantized_tensors.h) into
// placer's packed layout (loader/quantized_layout.h), exactly: the integer codes are kept, the
// scales become float32 and an integer zero point z becomes the offset m = -z·s, so that
// fma(q, s, m) is the format's (q - z)·s in float32. Values the tensor shapes cannot reject
// are checked here: GPTQ's g_idx (a permuted one, desc_act's activation order, is refused),
// compressed-tensors' weight_shape.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "loader/checkpoint.h"
#include "loader/prequantized_tensors.h"

namespace placer::loader {

// The packed weight [out, groups, block bytes] in host memory. Errors name the tensor.
absl::StatusOr<at::Tensor> RepackQuantizedLinear(const Checkpoint& checkpoint,
                                                 const QuantizedLinearSource& source);

}  // namespace placer::loader
