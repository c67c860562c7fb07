// x @ weight^T for the few rows of a decode step, reading each weight byte once.
//
// BLAS is built for large products: sgemm first packs (copies) the whole weight, and gemv
// reads it once per row, so a step of 8 streams through an [out, in] weight either copies
// it or reads it 8 times. These kernels keep a small tile of weight rows in registers and
// multiply it with every input row while it is there, so 8 rows cost little more memory
// traffic than one (bench/analysis.md has the numbers).
//
// Batch invariance: the result for one input row does not depend on which other rows are in
// the call, nor on its position among them (the same lanes, the same summation order), so a
// stream's greedy output is the same alone and inside any batch up to MaxRows.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace placer::model {

enum class VectorIsa { kNone, kAvx2, kAvx512 };

// kOutIn: [out, in] as nn.Linear stores it; kInOut: [in, out] as GPT-2's Conv1D does.
enum class WeightLayout { kOutIn, kInOut };

// The widest instruction set this CPU runs that the kernels have (checked once).
VectorIsa DetectVectorIsa();

// Input rows up to which the kernels of `isa` for `layout` are used (measured with
// `placer-bench-model products`, bench/analysis.md); 0 for kNone. For [out, in] with AVX-512
// it depends on the process's BLAS (Avx512OutInMaxRows).
int64_t SmallBatchLinearMaxRows(VectorIsa isa, WeightLayout layout = WeightLayout::kOutIn);

// Rows up to which the AVX-512 [out, in] kernel beats the sgemm of a BLAS: 256 (prompt chunks
// too) against one without AVX-512 sgemm kernels (OpenBLAS running its Haswell or Zen kernels,
// the reference BLAS), 32 against any other. `openblas_core`: base::OpenBlasCoreName();
// `blas_path`: BlasLibraryInUse().
int64_t Avx512OutInMaxRows(const std::string& openblas_core, const std::string& blas_path);

// True when x (any shape [..., in]), weight (in `layout`) and bias ([out] or undefined) are
// float32 CPU tensors the kernels take: weight and bias contiguous.
bool SmallBatchLinearApplies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             WeightLayout layout = WeightLayout::kOutIn);

// The operands of a product of x ([..., in]) by an [out, in] or [in, out] weight, as the CPU
// kernels take them: x as contiguous [rows, in], a float32 output [rows, out], and the shape the
// result is given back in (x's leading dimensions, then out).
struct RowsProduct {
  at::Tensor rows;
  at::Tensor y;
  std::vector<int64_t> shape;
};
RowsProduct RowsOf(const at::Tensor& x, int64_t in, int64_t out);

// x @ W^T + bias (W = weight in `layout`) with the kernels of `isa` (not kNone), on
// SpinningWorkers (as many threads as ATen's intra-op setting). Requires
// SmallBatchLinearApplies; any number of rows (MaxRows is where it stops paying).
at::Tensor SmallBatchLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            VectorIsa isa, WeightLayout layout = WeightLayout::kOutIn);

// x times each weight (+ its bias, or none where undefined) in one parallel loop over every
// weight's outputs (a decode step's q, k and v: one wait for the slowest thread, not three).
// Result i is bit for bit SmallBatchLinear(x, weights[i], biases[i], isa, layout).
std::vector<at::Tensor> SmallBatchLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                          const std::vector<at::Tensor>& biases, VectorIsa isa,
                                          WeightLayout layout = WeightLayout::kOutIn);

}  // namespace placer::model
