// Float32 products for OpenBLAS's sgemm with the rows padded where that is faster.
//
// Debian 12's OpenBLAS (0.3.21, pthread build) on two threads multiplies a chunk whose row count
// is not a multiple of 16 in about the time one thread takes: x @ weight^T over the small
// preset's layers (2 threads, a Zen 3 EPYC; /usr/bin/python3's torch on the same libblas.so.3,
// best of 16 passes) took 9.1 ms at 28 rows and 5.5 at 32, 7.6 at 40 and 5.6 at 48, 30.7 at
// 250 and 26.0 at 256; over TinyLlama's shapes 71 ms at 28 rows and 41 at 32. One thread showed
// no such step (28 rows 9.7 ms, 32 rows 10.4): there padding only adds work. Just past a
// multiple of 16 (17, 33, 50, 65 rows) padding gained nothing or lost. Thread counts other than
// two were not measured and are left as they are.
//
// Promise: PaddedSgemmLinear(x, weight, bias) is at::linear(x, weight, bias) for float32 rows
// and weights in host memory, x of any shape [..., in]; where it pads, the extra rows are zeros
// computed and dropped, and each real row's outputs depend on that row alone, as in sgemm.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace placer::model {

// The rows to give sgemm for a chunk of `rows` when OpenBLAS runs `blas_threads` threads: the
// next multiple of 16 at two threads when rows > 16 and rows % 16 >= 3, else `rows`.
int64_t SgemmPaddedRows(int64_t rows, int blas_threads);

// at::linear(x, weight, bias) (bias may be undefined), with x's rows padded to
// SgemmPaddedRows(rows, blas_threads) when that adds any; Linear passes
// base::OpenBlasThreads().
at::Tensor PaddedSgemmLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             int blas_threads);

}  // namespace placer::model
