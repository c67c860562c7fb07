#include "model/small_batch_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/openblas_core.h"
#include "model/causal_lm.h"

#include "model/small_batch_kernels.h"
#include "model/spinning_workers.h"
#include "model/weight_tasks.h"

namespace placer::model {

VectorIsa DetectVectorIsa() {
  static const VectorIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return VectorIsa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::kAvx2;
    return VectorIsa::kNone;
  }();
  return isa;
}

int64_t Avx512OutInMaxRows(const std::string& openblas_core, const std::string& blas_path) {
  // Small preset, 2 threads, ms per step (placer-bench-model products): against OpenBLAS's
  // Haswell kernels the kernel wins at every count to 256 (93 vs 131 at 128 rows, 246 vs 252
  // at 256); against its SkylakeX kernels up to 32 (32 vs 38) and not from 64 (57 vs 50).
  std::string core = openblas_core;
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  constexpr int64_t kAgainstAvx2Sgemm = 256, kAgainstAvx512Sgemm = 32;
  if (!core.empty()) {
    for (const char* avx512 : {"skylakex", "cooperlake", "sapphirerapids"}) {
      if (core == avx512) return kAgainstAvx512Sgemm;
    }
    return kAgainstAvx2Sgemm;
  }
  // The reference BLAS (Debian's libblas3, in .../blas/) is many times slower than either.
  if (blas_path.find("/blas/") != std::string::npos) return kAgainstAvx2Sgemm;
  return kAgainstAvx512Sgemm;
}

int64_t SmallBatchLinearMaxRows(VectorIsa isa, WeightLayout layout) {
  // With AVX2 [out, in] beats sgemm by little at 32 rows (38 vs 41 ms; 81 vs 64 at 64): 16
  // keeps a margin. [in, out]
  // only matches sgemm up to 8 rows (29 vs 32 ms at 8, 38 vs 27 at 16): used there for batch
  // invariance, not speed. (`placer-bench-model products [--avx2]`, bench/analysis.md.)
  static const int64_t avx512_out_in = Avx512OutInMaxRows(base::OpenBlasCoreName(), BlasLibraryInUse());
  const bool out_in = layout == WeightLayout::kOutIn;
  switch (isa) {
    case VectorIsa::kAvx512: return out_in ? avx512_out_in : 8;
    case VectorIsa::kAvx2: return out_in ? 16 : 4;
    case VectorIsa::kNone: return 0;
  }
  return 0;
}

namespace {

// Weight columns (kInOut) or rows (kOutIn) per unit of parallel work: below this a second
// thread costs more than it saves.
constexpr int64_t kOutputsPerTask = 64;

}  // namespace

RowsProduct RowsOf(const at::Tensor& x, int64_t in, int64_t out) {
  RowsProduct product;
  product.rows = x.reshape({-1, in}).contiguous();
  product.y = at::empty({product.rows.size(0), out}, product.rows.options().dtype(at::kFloat));
  product.shape = x.sizes().vec();
  product.shape.back() = out;
  return product;
}

bool SmallBatchLinearApplies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             WeightLayout layout) {
  const auto cpu_f32 = [](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.layout() == at::kStrided;
  };
  if (!cpu_f32(x) || !cpu_f32(weight) || x.dim() < 1 || weight.dim() != 2) return false;
  const int64_t in = weight.size(layout == WeightLayout::kOutIn ? 1 : 0);
  const int64_t out = weight.size(layout == WeightLayout::kOutIn ? 0 : 1);
  if (!weight.is_contiguous() || in != x.size(-1) || in == 0) return false;
  if (bias.defined() && (!cpu_f32(bias) || bias.dim() != 1 || !bias.is_contiguous() ||
                         bias.size(0) != out)) {
    return false;
  }
  return true;
}

std::vector<at::Tensor> SmallBatchLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                          const std::vector<at::Tensor>& biases, VectorIsa isa,
                                          WeightLayout layout) {
  TORCH_CHECK(isa != VectorIsa::kNone, "SmallBatchLinear needs AVX2 or AVX-512");
  TORCH_CHECK(weights.size() == biases.size(), "SmallBatchLinears: one bias (or none) per weight");
  std::vector<at::Tensor> ys;
  std::vector<Operands> ops;
  WeightTasks tasks(kOutputsPerTask);
  at::Tensor flat;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < weights.size(); ++i) {
    TORCH_CHECK(SmallBatchLinearApplies(x, weights[i], biases[i], layout),
                "SmallBatchLinear: unsupported operands for weight ", i);
    const int64_t in = weights[i].size(layout == WeightLayout::kOutIn ? 1 : 0);
    const int64_t out = weights[i].size(layout == WeightLayout::kOutIn ? 0 : 1);
    auto [rows_of_x, y, shape] = RowsOf(x, in, out);
    if (!flat.defined()) flat = rows_of_x;
    ys.push_back(y);
    shapes.push_back(shape);
    ops.push_back(Operands{flat.data_ptr<float>(), weights[i].data_ptr<float>(),
                           biases[i].defined() ? biases[i].data_ptr<float>() : nullptr,
                           y.data_ptr<float>(), flat.size(0), in, out});
    tasks.Add(out);
  }
  // Tasks split each weight's outputs at tile boundaries, so every output is computed the same
  // way whatever the thread count and whichever weights share the call; a chunk of tasks is
  // one run through the rows of each weight it touches.
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    tasks.ForEachRun(begin, end, [&](size_t i, int64_t n0, int64_t n1) {
      if (layout == WeightLayout::kOutIn) {
        OutInWeightRows(isa, ops[i], n0, n1);
      } else {
        InOutWeightColumns(isa, ops[i], n0, n1);
      }
    });
  };
  const int64_t count = flat.defined() && flat.size(0) > 0 ? tasks.count() : 0;
  if (count > 0 && !SpinningWorkers::Shared().TryRun(count, run)) {
    // Another thread (a unary Forward beside the engine) holds the helpers: ATen's pool.
    at::parallel_for(0, count, 1, run);
  }
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = ys[i].view(shapes[i]);
  return ys;
}

at::Tensor SmallBatchLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            VectorIsa isa, WeightLayout layout) {
  return SmallBatchLinears(x, {weight}, {bias}, isa, layout)[0];
}

}  // namespace placer::model

