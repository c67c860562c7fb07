#include "model/small_batch_bf16.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "model/bf16_rounding.h"
#include "model/small_batch_linear.h"
#include "model/spinning_workers.h"
#include "model/stream_prefetch.h"
#include "model/vector_sum.h"
#include "model/weight_tasks.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

struct Bf16Operands {
  const uint16_t* x;       // [rows, in] BF16 bits
  const uint16_t* weight;  // [out, in] BF16 bits
  const float* bias;       // [out] or null (converted to float32 once)
  float* y;                // [rows, out] float32, rounded to BF16 afterwards
  int64_t rows, in, out;
};

// One weight row per tile, read in order and prefetched kStreamPrefetchBytes ahead on the same
// stream (stream_prefetch.h): each thread's weights are one sequential stream. On a Zen 4 EPYC, tiles of
// 2 rows with rows prefetched 4 tiles ahead (two streams 4 KiB apart, two more ahead) took a
// ~1.1B decode step 100-113 ms against 56-62 ms, and the small preset's 8.1 ms against 5.8 at
// 1 row, 13.4 against 10.1 at 8 (bench/analysis.md, "One weight stream per thread"). The
// arithmetic of an output is the same whatever the tile, so this changed no result.
constexpr int kTileRows = 1;
constexpr int64_t kOutputsPerTask = 64;

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// The scalar tail of every path: the last in % lanes products, in order, after the vector sum.
inline float TailDot(const uint16_t* w, const uint16_t* x, int64_t k, int64_t in) {
  float sum = 0;
  for (; k < in; ++k) sum += Bf16ToFloat(w[k]) * Bf16ToFloat(x[k]);
  return sum;
}

// Each row's products with weight row w before its lanes are summed (AVX512-BF16, one tile row).
// No software prefetch, unlike the widening kernels below: on the 2-vCPU Zen 4 EPYC, ~1.1B BF16
// decode in process, 4 alternating rounds, each probed step against the read bandwidth right
// after it (placer-bench-model decode --read-probe-mib 256): 0.96-1.00 of that floor without the
// stream prefetch 8 KiB ahead, 0.80-0.88 with it; the small preset within noise either way
// (bench/analysis.md, twenty-ninth session).
template <int R>
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) inline void AccumulateBf16(
    const Bf16Operands& op, const uint16_t* x, const uint16_t* w, __m512 (&acc)[R]) {
  const int64_t in = op.in;
  _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k + 32 <= in; k += 32) {
    const __m512bh wv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + k));
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + r * in + k));
      acc[r] = _mm512_dpbf16_ps(acc[r], wv, xv);
    }
  }
}

template <int R, int T>
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) inline void TileBf16(
    const Bf16Operands& op, const uint16_t* x, const uint16_t* w, float* y,
    int64_t n) {
  const int64_t in = op.in;
  const int64_t k = in - in % 32;  // the scalar tail's start
  __m512 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) AccumulateBf16<R>(op, x, w + t * in, acc[t]);
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const float sum = _mm512_reduce_add_ps(acc[t][r]) + TailDot(w + t * in, x + r * in, k, in);
      y[r * op.out + t] = sum + bias;
    }
  }
}

__attribute__((target("avx512f"), always_inline)) inline __m512 Widen512(const uint16_t* p) {
  return WidenBf16Bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int R, int T>
__attribute__((target("avx512f,avx2,fma"), always_inline)) inline void TileWiden512(
    const Bf16Operands& op, const uint16_t* x, const uint16_t* w, float* y,
    int64_t n) {
  const int64_t in = op.in;
  __m512 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  const uint16_t* ahead = StreamAhead(w, T * in, op.weight + op.out * in);
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    __m512 wv[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      if (k % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + t * in + k), _MM_HINT_T0);
      wv[t] = Widen512(w + t * in + k);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const __m512 xv = Widen512(x + r * in + k);
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        acc[t][r] = _mm512_fmadd_ps(wv[t], xv, acc[t][r]);
      }
    }
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const float sum = _mm512_reduce_add_ps(acc[t][r]) + TailDot(w + t * in, x + r * in, k, in);
      y[r * op.out + t] = sum + bias;
    }
  }
}

__attribute__((target("avx2"), always_inline)) inline __m256 Widen256(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

template <int R, int T>
__attribute__((target("avx2,fma"), always_inline)) inline void TileWiden256(
    const Bf16Operands& op, const uint16_t* x, const uint16_t* w, float* y,
    int64_t n) {
  const int64_t in = op.in;
  __m256 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  const uint16_t* ahead = StreamAhead(w, T * in, op.weight + op.out * in);
  int64_t k = 0;
  for (; k + 8 <= in; k += 8) {
    __m256 wv[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      if (k % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + t * in + k), _MM_HINT_T0);
      wv[t] = Widen256(w + t * in + k);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const __m256 xv = Widen256(x + r * in + k);
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        acc[t][r] = _mm256_fmadd_ps(wv[t], xv, acc[t][r]);
      }
    }
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const float sum = HorizontalSum256(acc[t][r]) + TailDot(w + t * in, x + r * in, k, in);
      y[r * op.out + t] = sum + bias;
    }
  }
}

// Weight rows [n0, n1) times input rows [m, m + R), tile by tile; one function per ISA so
// code for one is never compiled with a wider one allowed.
#define PLACER_BF16_ROW_CHUNK(NAME, TARGET, TILE)                                             \
  template <int R>                                                                            \
  __attribute__((target(TARGET))) void NAME(const Bf16Operands& op, int64_t m, int64_t n0,    \
                                            int64_t n1) {                                     \
    const uint16_t* x = op.x + m * op.in;                                                     \
    float* y = op.y + m * op.out;                                                             \
    for (int64_t n = n0; n < n1; n += kTileRows) {                                            \
      TILE<R, kTileRows>(op, x, op.weight + n * op.in, y + n, n);                             \
    }                                                                                         \
  }
PLACER_BF16_ROW_CHUNK(RowChunkBf16PerOutput, "avx512f,avx512bw,avx512bf16", TileBf16)

// AVX512-BF16 at 2, 4 or 8 rows: the lanes of 16 / R outputs' R rows are summed together
// (HorizontalSums512x16, the intrinsic's order: every bit as TileBf16 gives them). A sum of its
// own is ~12 dependent instructions per output and row against 24 vdpbf16ps at 768 inputs; at 8
// rows the step is bound by the kernel's instructions (bench/analysis.md).
template <int R>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void RowChunkBf16(const Bf16Operands& op,
                                                                         int64_t m, int64_t n0,
                                                                         int64_t n1) {
  if constexpr (R == 1 || 16 % R != 0) {
    // One row reads its weights at memory speed either way: its own lane sums cost nothing
    // there (small preset BF16 decode, 5 alternating rounds: 4.6-5.3 ms a step per output,
    // 4.7-5.9 sixteen at a time).
    RowChunkBf16PerOutput<R>(op, m, n0, n1);
  } else {
    constexpr int kOutputs = 16 / R;
    const uint16_t* x = op.x + m * op.in;
    float* y = op.y + m * op.out;
    const int64_t vector_end = op.in - op.in % 32;
    int64_t n = n0;
    for (; n + kOutputs <= n1; n += kOutputs) {
      __m512 lanes[16];
      _Pragma("GCC unroll 1") for (int o = 0; o < kOutputs; ++o) {
        __m512 acc[R];
        AccumulateBf16<R>(op, x, op.weight + (n + o) * op.in, acc);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) lanes[o * R + r] = acc[r];
      }
      alignas(64) float sums[16];
      _mm512_store_ps(sums, HorizontalSums512x16(lanes));
      for (int o = 0; o < kOutputs; ++o) {
        const uint16_t* w = op.weight + (n + o) * op.in;
        const float bias = op.bias != nullptr ? op.bias[n + o] : 0.0f;
        for (int r = 0; r < R; ++r) {
          const float sum = sums[o * R + r] + TailDot(w, x + r * op.in, vector_end, op.in);
          y[r * op.out + n + o] = sum + bias;
        }
      }
    }
    if (n < n1) RowChunkBf16PerOutput<R>(op, m, n, n1);
  }
}
PLACER_BF16_ROW_CHUNK(RowChunkWiden512, "avx512f,avx2,fma", TileWiden512)
PLACER_BF16_ROW_CHUNK(RowChunkWiden256, "avx2,fma", TileWiden256)
#undef PLACER_BF16_ROW_CHUNK

template <int R>
void RowChunk(Bf16Isa isa, const Bf16Operands& op, int64_t m, int64_t n0, int64_t n1) {
  switch (isa) {
    case Bf16Isa::kAvx512Bf16: RowChunkBf16<R>(op, m, n0, n1); break;
    case Bf16Isa::kAvx512: RowChunkWiden512<R>(op, m, n0, n1); break;
    default: RowChunkWiden256<R>(op, m, n0, n1); break;
  }
}

void WeightRows(Bf16Isa isa, const Bf16Operands& op, int64_t n0, int64_t n1) {
  const int64_t chunk = isa == Bf16Isa::kAvx2 ? 4 : 8;
  for (int64_t m = 0; m < op.rows; m += chunk) {
    switch (std::min(chunk, op.rows - m)) {
      case 1: RowChunk<1>(isa, op, m, n0, n1); break;
      case 2: RowChunk<2>(isa, op, m, n0, n1); break;
      case 3: RowChunk<3>(isa, op, m, n0, n1); break;
      case 4: RowChunk<4>(isa, op, m, n0, n1); break;
      case 5: RowChunk<5>(isa, op, m, n0, n1); break;
      case 6: RowChunk<6>(isa, op, m, n0, n1); break;
      case 7: RowChunk<7>(isa, op, m, n0, n1); break;
      default: RowChunk<8>(isa, op, m, n0, n1); break;
    }
  }
}

bool Runs(Bf16Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Bf16Isa::kAvx512Bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512bf16");
    case Bf16Isa::kAvx512: return __builtin_cpu_supports("avx512f");
    case Bf16Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Bf16Isa::kNone: return true;
  }
  return false;
}

}  // namespace

std::vector<Bf16Isa> RunnableBf16Isas() {
  std::vector<Bf16Isa> isas;
  for (Bf16Isa isa : {Bf16Isa::kAvx512Bf16, Bf16Isa::kAvx512, Bf16Isa::kAvx2}) {
    if (Runs(isa)) isas.push_back(isa);
  }
  return isas;
}

Bf16Isa DetectBf16Isa() {
  static const Bf16Isa isa = [] {
    const std::vector<Bf16Isa> isas = RunnableBf16Isas();
    return isas.empty() ? Bf16Isa::kNone : isas.front();
  }();
  return isa;
}

const char* Bf16IsaName(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::kAvx512Bf16: return "avx512_bf16";
    case Bf16Isa::kAvx512: return "avx512f";
    case Bf16Isa::kAvx2: return "avx2";
    case Bf16Isa::kNone: return "none";
  }
  return "none";
}

int64_t SmallBatchBf16MaxRows(Bf16Isa isa) {
  // `placer-bench-model products` (small preset, 2 threads, ms per step, AVX512-BF16 CPU): the
  // kernel beats ATen's BF16 linear (oneDNN) to 8 rows (12 vs 22 at 1, 36 vs 39 at 8) and
  // loses from 16 (104 vs 48), where oneDNN's GEMM reuses each weight across more rows.
  // With AVX2 alone oneDNN has no BF16 GEMM and ATen's fallback is a scalar loop (small
  // preset's layers at 64 rows, 2 threads, a Zen 3 EPYC, `placer-bench-model quantized-products`:
  // 138 ms a pass against ATen's 4406; a 64-token prompt of the small BF16 model took 4.7 s
  // through placerd). Longer chunks go to float32 sgemm instead (widened_bf16_linear.h): same
  // tool, `bf16_ms`, kernel vs widened, 16 rows 23.8-24.1 vs 22.2-22.9 ms, 24 rows 35.4-35.5 vs
  // 42.1-51.5, 32 rows 46.6-47.0 vs 35.2-42.3, 48 rows 70 vs 45, 64 rows 93 vs 53-55. Yet a
  // 32-token prompt of the small BF16 model (`placer-bench-model decode --dtype auto
  // --prompt-tokens 32`, 5 alternating runs) took 99-120 ms widened against 83-88 on the kernel:
  // 32 rows stay here.
  if (isa == Bf16Isa::kAvx2) return 32;
  return isa == Bf16Isa::kNone ? 0 : 8;
}

bool AtenBf16GemmIsVectorized() {
  const Bf16Isa isa = DetectBf16Isa();
  return isa == Bf16Isa::kAvx512 || isa == Bf16Isa::kAvx512Bf16;
}

bool SmallBatchBf16Applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const auto cpu = [](const at::Tensor& t, at::ScalarType type) {
    return t.device().is_cpu() && t.scalar_type() == type && t.layout() == at::kStrided;
  };
  if (!cpu(x, at::kBFloat16) || !cpu(weight, at::kBFloat16) || x.dim() < 1 || weight.dim() != 2) {
    return false;
  }
  if (!weight.is_contiguous() || weight.size(1) != x.size(-1) || weight.size(1) == 0) return false;
  if (bias.defined() &&
      (!(cpu(bias, at::kBFloat16) || cpu(bias, at::kFloat)) || bias.dim() != 1 ||
       !bias.is_contiguous() || bias.size(0) != weight.size(0))) {
    return false;
  }
  return true;
}

std::vector<at::Tensor> SmallBatchLinearsBf16(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                              const std::vector<at::Tensor>& biases, Bf16Isa isa) {
  TORCH_CHECK(isa != Bf16Isa::kNone && Runs(isa), "SmallBatchLinearBf16: this CPU cannot run ",
              Bf16IsaName(isa));
  TORCH_CHECK(weights.size() == biases.size(), "SmallBatchLinearsBf16: one bias (or none) per weight");
  for (size_t i = 0; i < weights.size(); ++i) {
    TORCH_CHECK(SmallBatchBf16Applies(x, weights[i], biases[i]),
                "SmallBatchLinearBf16: unsupported operands for weight ", i);
  }
  const int64_t in = x.size(-1);
  const at::Tensor flat = x.is_contiguous() ? x : x.contiguous();
  const int64_t rows = flat.numel() / in;
  std::vector<at::Tensor> ys;
  // The float32 sums and BF16 biases widened, in buffers reused per thread: decode steps call
  // this for every projection, where ATen's conversions (a dispatch and a fresh tensor each)
  // cost more than these loops.
  thread_local base::CacheLineVector<float> sums, bias_buffer;
  std::vector<size_t> sums_at, bias_at;  // each weight's offsets in them (SIZE_MAX: a float32 bias)
  size_t sum_count = 0, bias_count = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t out = weights[i].size(0);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = out;
    ys.push_back(at::empty(shape, flat.options()));
    sums_at.push_back(sum_count);
    sum_count += static_cast<size_t>(rows * out);
    const bool widened = biases[i].defined() && biases[i].scalar_type() != at::kFloat;
    bias_at.push_back(widened ? bias_count : SIZE_MAX);
    if (widened) bias_count += static_cast<size_t>(out);
  }
  if (rows == 0) return ys;
  sums.resize(sum_count);
  bias_buffer.resize(bias_count);
  std::vector<Bf16Operands> ops;
  WeightTasks tasks(kOutputsPerTask);
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t out = weights[i].size(0);
    const float* bias32 = nullptr;
    if (bias_at[i] != SIZE_MAX) {
      const at::BFloat16* values = biases[i].data_ptr<at::BFloat16>();
      float* widened = bias_buffer.data() + bias_at[i];
      for (int64_t n = 0; n < out; ++n) widened[n] = static_cast<float>(values[n]);
      bias32 = widened;
    } else if (biases[i].defined()) {
      bias32 = biases[i].data_ptr<float>();
    }
    ops.push_back(Bf16Operands{reinterpret_cast<const uint16_t*>(flat.data_ptr<at::BFloat16>()),
                               reinterpret_cast<const uint16_t*>(weights[i].data_ptr<at::BFloat16>()),
                               bias32, sums.data() + sums_at[i], rows, in, out});
    tasks.Add(out);
  }
  // Tasks split each weight's outputs at tile boundaries, so every output is computed the same
  // way whatever the thread count and whichever weights share the call; a chunk of tasks is
  // one run through the rows of each weight it touches.
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    tasks.ForEachRun(begin, end, [&](size_t i, int64_t n0, int64_t n1) { WeightRows(isa, ops[i], n0, n1); });
  };
  if (!SpinningWorkers::Shared().TryRun(tasks.count(), run)) at::parallel_for(0, tasks.count(), 1, run);
  // One rounding to BF16 (to nearest even, as ATen's conversion), after the float32 sum and bias.
  for (size_t i = 0; i < ys.size(); ++i) {
    at::BFloat16* values = ys[i].data_ptr<at::BFloat16>();
    const float* sum = sums.data() + sums_at[i];
    for (int64_t j = 0; j < rows * ops[i].out; ++j) values[j] = at::BFloat16(sum[j]);
  }
  // Kept for the next decode step unless a large call grew it (4 MiB each at most).
  constexpr size_t kKeptFloats = size_t{1} << 20;
  if (sums.capacity() > kKeptFloats) base::CacheLineVector<float>().swap(sums);
  return ys;
}

at::Tensor SmallBatchLinearBf16(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, Bf16Isa isa) {
  return SmallBatchLinearsBf16(x, {weight}, {bias}, isa)[0];
}

}  // namespace placer::model

#pragma GCC diagnostic pop
