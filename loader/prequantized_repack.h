// Repacks one pre-quantized linear weight (its parts: loader/prequantized_tensors.h) into
// placer's packed layout (loader/quantized_layout.h), exactly: the integer codes are kept, the
// scales become float32 and an integer zero point z becomes the offset m = -z·s, so that
// fma(q, s, m) is the format's (q - z)·s in float32. Values the tensor shapes cannot reject
// are checked here: GPTQ's g_idx, compressed-tensors' weight_g_idx and weight_shape. The codes
// go a row at a time from the stored tensor into the packed one (in parallel; no copy of the
// whole weight is made: a load's cost is reading the checkpoint and writing the packed bytes).
//
// Activation order (GPTQ desc_act, compressed-tensors actorder "group"): g_idx gives each
// input's group, in any order. The packed layout wants each group's inputs contiguous, so
// such a weight is repacked with its inputs reordered (group by group, stable) and the model gathers its input in the same order before
// the product (QuantizedInputOrder; model/linear_input_orders.h): y = W[:, order] · x[order],
// the same sum in another order.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "loader/checkpoint.h"
#include "loader/prequantized_tensors.h"

namespace placer::loader {

// The packed weight [out, groups, block bytes] in host memory. Errors name the tensor.
absl::StatusOr<at::Tensor> RepackQuantizedLinear(const Checkpoint& checkpoint,
                                                 const QuantizedLinearSource& source);

// The order a linear's input is gathered in before its packed product: int32 [in], g_idx
// sorted stably (each group's inputs contiguous, in their stored order); an undefined tensor
// when the inputs are already in group order (or the format has no g_idx). Errors name g_idx
// and say why: a reordering with desc_act false, a group outside 0..groups-1, a group that
// does not hold exactly group_size inputs.
absl::StatusOr<at::Tensor> QuantizedInputOrder(const Checkpoint& checkpoint,
                                               const QuantizedLinearSource& source);

}  // namespace placer::loader
