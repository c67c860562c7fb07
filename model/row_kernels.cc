#include "model/row_kernels.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "model/bf16_rounding.h"
#include "model/keep_in_register.h"
#include "model/spinning_workers.h"

namespace placer::model {
namespace {

constexpr int64_t kLanes = 16;
// Rows are spread over the helpers from this many elements (a prompt chunk's, not a decode
// step's few rows, whose handful of microseconds would not pay for the hand-off).
constexpr int64_t kSpreadElements = 1 << 14;

// Up to 16 values of a row from element i on (zeros past `count`), as float32.
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 Load(
    const T* p, __mmask16 mask) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_maskz_loadu_ps(mask, p);
  } else {
    return WidenBf16Bits(_mm256_maskz_loadu_epi16(mask, p));
  }
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void Store(
    T* p, __mmask16 mask, __m512 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(p, mask, v);
  } else {
    _mm256_mask_storeu_epi16(p, mask, RoundToBf16Bits(v));
  }
}

inline __mmask16 MaskOf(int64_t left) {
  return static_cast<__mmask16>(left >= kLanes ? 0xFFFF : (1u << left) - 1);
}

float InverseRms(const float (&partial)[kLanes], int64_t width, double eps) {
  float sum = 0;
  for (float p : partial) sum += p;
  return 1.0f / std::sqrt(sum / static_cast<float>(width) + static_cast<float>(eps));
}

template <typename T>
void RmsNormRowScalar(const T* x, const T* w, T* y, int64_t width, double eps) {
  float partial[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= width; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float v = static_cast<float>(x[i + l]);
      partial[l] += v * v;
    }
  }
  for (int64_t l = 0; i + l < width; ++l) {
    const float v = static_cast<float>(x[i + l]);
    partial[l] += v * v;
  }
  const float inverse_rms = InverseRms(partial, width, eps);
  for (int64_t j = 0; j < width; ++j) {
    if constexpr (std::is_same_v<T, float>) {
      y[j] = w[j] * (x[j] * inverse_rms);
    } else {
      const T normalised(static_cast<float>(x[j]) * inverse_rms);
      y[j] = T(static_cast<float>(w[j]) * static_cast<float>(normalised));
    }
  }
}

// The scalar row's operations lane for lane: lane l's partial sum gets the squares of elements
// l, l + 16, ... in order (a masked tail adds +0, which leaves a sum of squares as it is).
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void RmsNormRowVector(const T* x, const T* w,
                                                                         T* y, int64_t width,
                                                                         double eps) {
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < width; i += kLanes) {
    const __m512 v = Load(x + i, MaskOf(width - i));
    // Rounded as a product first, as the scalar row rounds it: GCC would otherwise fuse the
    // multiply and the add into one fma (it contracts across intrinsics) and change the sums.
    __m512 square = _mm512_mul_ps(v, v);
    KeepInRegister(square);
    sum = _mm512_add_ps(sum, square);
  }
  alignas(64) float partial[kLanes];
  _mm512_store_ps(partial, sum);
  const __m512 inverse_rms = _mm512_set1_ps(InverseRms(partial, width, eps));
  for (int64_t j = 0; j < width; j += kLanes) {
    const __mmask16 mask = MaskOf(width - j);
    __m512 normalised = _mm512_mul_ps(Load(x + j, mask), inverse_rms);
    if constexpr (!std::is_same_v<T, float>) normalised = RoundThroughBf16(normalised);
    Store(y + j, mask, _mm512_mul_ps(Load(w + j, mask), normalised));
  }
}

template <typename T>
void AddRowScalar(const T* a, const T* b, T* y, int64_t count) {
  for (int64_t j = 0; j < count; ++j) y[j] = T(static_cast<float>(a[j]) + static_cast<float>(b[j]));
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void AddRowVector(const T* a, const T* b, T* y,
                                                                     int64_t count) {
  for (int64_t j = 0; j < count; j += kLanes) {
    const __mmask16 mask = MaskOf(count - j);
    Store(y + j, mask, _mm512_add_ps(Load(a + j, mask), Load(b + j, mask)));
  }
}

// fn(r) for every row r of `rows` rows of `width` elements: on the helpers for a prompt chunk.
template <typename Fn>
void ForEachRow(int64_t rows, int64_t width, const Fn& fn) {
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  };
  if (rows > 1 && rows * width >= kSpreadElements && SpinningWorkers::Shared().TryRun(rows, run)) {
    return;
  }
  run(0, rows);
}

bool FloatOrBf16OnCpu(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == at::kStrided &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

template <typename T>
at::Tensor RmsNormTyped(const at::Tensor& x, const at::Tensor& weight, double eps, bool vector) {
  const int64_t width = x.size(-1);
  // A decode step's rows are already [rows, width] and contiguous: reshape, contiguous, view
  // and empty_like were most of an RMSNorm of one 768-wide row (perf, bench/analysis.md).
  const bool flat = x.dim() == 2 && x.is_contiguous();
  const at::Tensor rows = flat ? x : x.reshape({-1, width}).contiguous();
  at::Tensor y = at::empty(rows.sizes(), rows.options());
  const T* in = rows.data_ptr<T>();
  const T* w = weight.data_ptr<T>();
  T* out = y.data_ptr<T>();
  ForEachRow(rows.size(0), width, [&](int64_t r) {
    if (vector) {
      RmsNormRowVector(in + r * width, w, out + r * width, width, eps);
    } else {
      RmsNormRowScalar(in + r * width, w, out + r * width, width, eps);
    }
  });
  return flat ? y : y.view(x.sizes());
}

template <typename T>
at::Tensor AddTyped(const at::Tensor& a, const at::Tensor& b, bool vector) {
  at::Tensor y = at::empty(a.sizes(), a.options());  // a is contiguous (AddRows' rows form)
  const int64_t width = a.dim() > 0 ? a.size(-1) : 1;
  const int64_t rows = width > 0 ? a.numel() / width : 0;
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* out = y.data_ptr<T>();
  ForEachRow(rows, width, [&](int64_t r) {
    if (vector) {
      AddRowVector(pa + r * width, pb + r * width, out + r * width, width);
    } else {
      AddRowScalar(pa + r * width, pb + r * width, out + r * width, width);
    }
  });
  return y;
}

}  // namespace

bool RowKernelsVectorRuns() {
  static const bool runs = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return runs;
}

bool RmsNormRowsApplies(const at::Tensor& x, const at::Tensor& weight) {
  return FloatOrBf16OnCpu(x) && weight.device().is_cpu() && x.scalar_type() == weight.scalar_type() &&
         x.dim() >= 1 && weight.dim() == 1 && weight.is_contiguous() &&
         weight.size(0) == x.size(-1) && x.size(-1) > 0;
}

at::Tensor RmsNormRows(const at::Tensor& x, const at::Tensor& weight, double eps, bool vector) {
  TORCH_CHECK(RmsNormRowsApplies(x, weight), "RmsNormRows: unsupported operands");
  TORCH_CHECK(!vector || RowKernelsVectorRuns(), "RmsNormRows: this CPU lacks AVX-512 F/BW/VL");
  return x.scalar_type() == at::kFloat ? RmsNormTyped<float>(x, weight, eps, vector)
                                       : RmsNormTyped<c10::BFloat16>(x, weight, eps, vector);
}

at::Tensor AddRows(const at::Tensor& a, const at::Tensor& b, bool vector) {
  TORCH_CHECK(!vector || RowKernelsVectorRuns(), "AddRows: this CPU lacks AVX-512 F/BW/VL");
  const bool rows_form = FloatOrBf16OnCpu(a) && FloatOrBf16OnCpu(b) &&
                         a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
                         a.is_contiguous() && b.is_contiguous() && a.numel() > 0;
  if (!rows_form) return a + b;
  return a.scalar_type() == at::kFloat ? AddTyped<float>(a, b, vector)
                                       : AddTyped<c10::BFloat16>(a, b, vector);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
