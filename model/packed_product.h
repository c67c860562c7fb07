// RunPackedProduct: what every packed-weight kernel entry of quantized_linear.cc shares: the
// rows as float32, each group's input sums, the outputs split into tasks for the kernels'
// threads, and BF16 results rounded once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {

// Outputs per task of a packed product or an unpacking. Tasks end at fixed output boundaries,
// so an output is computed the same way whatever the thread count.
constexpr int64_t kPackedOutputsPerTask = 64;

// Flattens x (a packed weight's [..., in] float32 or BF16 rows; QuantizedLinearApplies) to
// float32 rows, sums each group of every row's inputs (the offsets' share of the product: the
// same sums for a row alone or in any batch), calls `prepare(op)` once on the calling thread,
// then runs `outputs(op, n0, n1)` over the tasks on SpinningWorkers (ATen's pool where they are
// busy). BF16 rows get BF16 outputs, rounded to nearest even from the float32 ones (as ATen's
// conversion rounds). The calling thread keeps its buffers for the next call, except a long
// prompt's, which are given back.
at::Tensor RunPackedProduct(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const std::function<void(const QuantOperands&)>& prepare,
                            const std::function<void(const QuantOperands&, int64_t, int64_t)>& outputs);

// True when the packed weights differ at most in their outputs (same in, bits and group size):
// what one input's prepared form (its group sums, digits, int8 codes or arranged pairs) serves.
bool PackedWeightsShareInputs(const std::vector<at::Tensor>& weights);

// RunPackedProduct for several weights that share their inputs (PackedWeightsShareInputs) and
// one x, as Llama's q, k and v or gate and up: x widened, summed and prepared once (`prepare`
// sees the first weight's operands; it may use only what the weights share), and one parallel
// loop over every weight's tasks, so a decode step waits for its helpers once instead of once
// a weight. Each output is computed exactly as RunPackedProduct would compute it alone.
// `biases` holds one (possibly undefined) tensor per weight. A kernel whose outputs do not
// depend on where a task starts may ask for other `outputs_per_task` (smaller: a shorter last
// task for the other threads to wait out).
std::vector<at::Tensor> RunPackedProducts(
    const at::Tensor& x, const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
    const std::function<void(const QuantOperands&)>& prepare,
    const std::function<void(const QuantOperands&, int64_t, int64_t)>& outputs,
    int64_t outputs_per_task = kPackedOutputsPerTask);

// The calling thread's buffer for inputs arranged in a kernel's own order, reused by its next
// call; a long prompt's is given back (as RunPackedProduct gives back its buffers).
base::CacheLineVector<float>& ArrangedInputs();

}  // namespace placer::model
