#include "model/padded_sgemm.h"

#include <vector>

namespace placer::model {

int64_t SgemmPaddedRows(int64_t rows, int blas_threads) {
  constexpr int64_t kRowMultiple = 16;
  if (blas_threads != 2 || rows <= kRowMultiple || rows % kRowMultiple < 3) return rows;
  return (rows + kRowMultiple - 1) / kRowMultiple * kRowMultiple;
}

at::Tensor PaddedSgemmLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             int blas_threads) {
  const int64_t in = x.size(-1);
  const int64_t rows = in > 0 ? x.numel() / in : 0;
  const int64_t padded_rows = SgemmPaddedRows(rows, blas_threads);
  if (padded_rows == rows) return bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight);
  at::Tensor padded = at::zeros({padded_rows, in}, x.options());
  padded.narrow(0, 0, rows).copy_(x.reshape({rows, in}));
  const at::Tensor y = bias.defined() ? at::linear(padded, weight, bias) : at::linear(padded, weight);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return y.narrow(0, 0, rows).view(shape);
}

}  // namespace placer::model
