#include "model/bf16_pairs.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "loader/huge_page_tensor.h"
#include "model/bf16_rounding.h"
#include "model/spinning_workers.h"

namespace placer::model {
namespace {

constexpr int64_t kGroup = 32;          // outputs per group: two 16-lane stripes
constexpr int64_t kPairBytes = kGroup * 2 * sizeof(uint16_t);  // one input pair of a group
constexpr int64_t kGroupsPerTask = 2;   // 64 outputs, as the [out, in] kernels' tasks
constexpr int kRowsPerPass = 8;         // 16 accumulators; the rest of the registers for loads
constexpr int64_t kRowsPerLoop = 64;    // rows whose inputs (64 x in x 2 bytes) a loop keeps in cache
// How far ahead of its loads a pass prefetches its own weight stream. A standalone pass over
// 150 MB (one thread, the 2-vCPU Zen 4 EPYC): 8 rows took 19-21 ms with the hardware
// prefetchers alone, 8.9-9.5 ms prefetching every line 2-8 KiB ahead (one row: ~9 ms either
// way), i.e. the weights' read time (bench/analysis.md, "BF16 pair order").
constexpr int64_t kPrefetchBytes = 2048;

void RunParallel(int64_t tasks, const SpinningWorkers::RangeFn& fn) {
  if (!SpinningWorkers::Shared().TryRun(tasks, fn)) at::parallel_for(0, tasks, 1, fn);
}

inline uint32_t LoadPair(const uint16_t* p) {
  uint32_t pair;
  std::memcpy(&pair, p, sizeof(pair));
  return pair;
}

struct PairOperands {
  const uint16_t* x;      // [rows, in] BF16 bits
  const uint16_t* pairs;  // the weight in pair order
  const float* bias;      // [out] float32, or null
  uint16_t* y;            // [rows, out] BF16 bits
  int64_t rows, in, out;
};

// Rows [r0, r0 + R) times group g: each output one chain over the input pairs in order.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void GroupRows(const PairOperands& op,
                                                                       int64_t g, int64_t r0) {
  const int64_t in = op.in, k_pairs = in / 2;
  const uint16_t* x = op.x + r0 * in;
  const char* w = reinterpret_cast<const char*>(op.pairs) + g * k_pairs * kPairBytes;
  __m512 acc[R][2];
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t kp = 0; kp < k_pairs; ++kp, w += kPairBytes) {
    // Prefetches never fault, so the last pairs' reach past the tensor's end is harmless.
    _mm_prefetch(w + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch(w + kPrefetchBytes + 64, _MM_HINT_T0);
    const __m512bh w0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w));
    const __m512bh w1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 64));
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
      const __m512bh xv =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(LoadPair(x + r * in + 2 * kp))));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w0, xv);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w1, xv);
    }
  }
  const int64_t n = g * kGroup;
  const __m512 b0 = op.bias != nullptr ? _mm512_loadu_ps(op.bias + n) : _mm512_setzero_ps();
  const __m512 b1 = op.bias != nullptr ? _mm512_loadu_ps(op.bias + n + 16) : _mm512_setzero_ps();
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    uint16_t* y = op.y + (r0 + r) * op.out + n;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), RoundToBf16Bits(_mm512_add_ps(acc[r][0], b0)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + 16),
                        RoundToBf16Bits(_mm512_add_ps(acc[r][1], b1)));
  }
}

// Groups [g0, g1) for every row, 8 rows at a time: a group's weights (in / 2 x 128 bytes) come
// from memory for the first 8 rows and from cache for the next.
void Groups(const PairOperands& op, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    for (int64_t r = 0; r < op.rows; r += kRowsPerPass) {
      switch (std::min<int64_t>(kRowsPerPass, op.rows - r)) {
        case 1: GroupRows<1>(op, g, r); break;
        case 2: GroupRows<2>(op, g, r); break;
        case 3: GroupRows<3>(op, g, r); break;
        case 4: GroupRows<4>(op, g, r); break;
        case 5: GroupRows<5>(op, g, r); break;
        case 6: GroupRows<6>(op, g, r); break;
        case 7: GroupRows<7>(op, g, r); break;
        default: GroupRows<8>(op, g, r); break;
      }
    }
  }
}

int64_t OutputsOf(const at::Tensor& pairs) { return pairs.size(0) * kGroup; }
int64_t InputsOf(const at::Tensor& pairs) { return pairs.size(1) * 2; }

void CheckOperands(const at::Tensor& x, const at::Tensor& pairs, const at::Tensor& bias) {
  TORCH_CHECK(Bf16PairsRun(), "Bf16PairLinear: this CPU has no AVX512-BF16 (or PLACER_BF16_PAIRS=0)");
  TORCH_CHECK(IsBf16PairWeight(pairs), "Bf16PairLinear: the weight is not in pair order: ",
              pairs.scalar_type(), " ", pairs.sizes());
  const int64_t out = OutputsOf(pairs), in = InputsOf(pairs);
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kBFloat16 && x.dim() >= 1 &&
                  x.size(-1) == in,
              "Bf16PairLinear: the input must be BF16 [..., ", in, "] on the CPU, got ",
              x.scalar_type(), " ", x.sizes());
  TORCH_CHECK(!bias.defined() || (bias.device().is_cpu() && bias.dim() == 1 &&
                                  bias.size(0) == out &&
                                  (bias.scalar_type() == at::kFloat ||
                                   bias.scalar_type() == at::kBFloat16)),
              "Bf16PairLinear: the bias must be float32 or BF16 [", out, "], got ",
              bias.defined() ? bias.sizes() : at::IntArrayRef{});
}

}  // namespace

bool Bf16PairsRun() {
  static const bool runs = [] {
    const char* choice = std::getenv("PLACER_BF16_PAIRS");
    if (choice != nullptr && std::strcmp(choice, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return runs;
}

bool IsBf16PairWeight(const at::Tensor& tensor) {
  return tensor.defined() && tensor.device().is_cpu() && tensor.layout() == at::kStrided &&
         tensor.scalar_type() == at::kBFloat16 && tensor.dim() == 4 &&
         tensor.size(2) == kGroup && tensor.size(3) == 2 && tensor.size(0) > 0 &&
         tensor.size(1) > 0 && tensor.is_contiguous();
}

at::Tensor PackBf16Pairs(const at::Tensor& weight) {
  TORCH_CHECK(weight.device().is_cpu() && weight.scalar_type() == at::kBFloat16 &&
                  weight.dim() == 2 && weight.is_contiguous() &&
                  Bf16PairShapeFits(weight.size(0), weight.size(1)),
              "PackBf16Pairs: wants a contiguous BF16 [out, in] CPU weight with out a multiple "
              "of 32 and in even, got ", weight.scalar_type(), " ", weight.sizes());
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t groups = out / kGroup, k_pairs = in / 2;
  at::Tensor pairs = loader::HugePageZeros({groups, k_pairs, kGroup, 2}, at::kBFloat16);
  const auto* from = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  auto* to = reinterpret_cast<uint32_t*>(pairs.data_ptr<at::BFloat16>());
  // Row by row: each weight row is read in order, and a group's pairs (in / 2 x 128 bytes) stay
  // in cache while its 32 rows are written in. (Pair by pair, the 32 reads of each pair are a
  // row apart, often a multiple of 4 KiB, and kept evicting one another: the ~1.1B model's
  // first request took 3.5 s against 0.4 unpacked.)
  RunParallel(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      uint32_t* group = to + g * k_pairs * kGroup;
      for (int64_t o = 0; o < kGroup; ++o) {
        const uint16_t* row = from + (g * kGroup + o) * in;
        for (int64_t kp = 0; kp < k_pairs; ++kp) group[kp * kGroup + o] = LoadPair(row + 2 * kp);
      }
    }
  });
  return pairs;
}

at::Tensor UnpackBf16Pairs(const at::Tensor& pairs) {
  TORCH_CHECK(IsBf16PairWeight(pairs), "UnpackBf16Pairs: not a weight in pair order: ",
              pairs.scalar_type(), " ", pairs.sizes());
  const int64_t groups = pairs.size(0), k_pairs = pairs.size(1), in = 2 * k_pairs;
  at::Tensor weight = at::empty({groups * kGroup, in}, pairs.options());
  const auto* from = reinterpret_cast<const uint32_t*>(pairs.data_ptr<at::BFloat16>());
  auto* to = reinterpret_cast<uint16_t*>(weight.data_ptr<at::BFloat16>());
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t o = 0; o < kGroup; ++o) {
      uint16_t* row = to + (g * kGroup + o) * in;
      for (int64_t kp = 0; kp < k_pairs; ++kp) {
        std::memcpy(row + 2 * kp, from + (g * k_pairs + kp) * kGroup + o, sizeof(uint32_t));
      }
    }
  }
  return weight;
}

std::vector<at::Tensor> Bf16PairLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(weights.size() == biases.size(), "Bf16PairLinears: one bias (or none) per weight");
  for (size_t i = 0; i < weights.size(); ++i) CheckOperands(x, weights[i], biases[i]);
  const at::Tensor flat = x.contiguous();
  const int64_t in = x.size(-1);
  const int64_t rows = in > 0 ? flat.numel() / in : 0;
  std::vector<at::Tensor> ys;
  std::vector<PairOperands> ops;
  std::vector<at::Tensor> biases32;
  std::vector<int64_t> task_starts = {0};  // weight i's tasks start at task_starts[i]
  for (size_t i = 0; i < weights.size(); ++i) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = OutputsOf(weights[i]);
    ys.push_back(at::empty(shape, flat.options()));
    biases32.push_back(biases[i].defined() ? biases[i].to(at::kFloat).contiguous() : at::Tensor());
    ops.push_back({reinterpret_cast<const uint16_t*>(flat.data_ptr<at::BFloat16>()),
                   reinterpret_cast<const uint16_t*>(weights[i].data_ptr<at::BFloat16>()),
                   biases32[i].defined() ? biases32[i].data_ptr<float>() : nullptr,
                   reinterpret_cast<uint16_t*>(ys[i].data_ptr<at::BFloat16>()), rows, in,
                   OutputsOf(weights[i])});
    const int64_t groups = weights[i].size(0);
    task_starts.push_back(task_starts.back() + (groups + kGroupsPerTask - 1) / kGroupsPerTask);
  }
  // Long prompt chunks kRowsPerLoop rows at a time: a loop's rows stay in cache while every
  // group of weights passes them (the weights are read once per loop).
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerLoop) {
    std::vector<PairOperands> chunk = ops;
    for (PairOperands& op : chunk) {
      op.x += r0 * in;
      op.y += r0 * op.out;
      op.rows = std::min(kRowsPerLoop, rows - r0);
    }
    RunParallel(task_starts.back(), [&](int64_t begin, int64_t end) {
      for (size_t i = 0; i < chunk.size(); ++i) {
        const int64_t first = std::max(begin, task_starts[i]);
        const int64_t last = std::min(end, task_starts[i + 1]);
        if (first >= last) continue;
        const int64_t groups = chunk[i].out / kGroup;
        Groups(chunk[i], (first - task_starts[i]) * kGroupsPerTask,
               std::min(groups, (last - task_starts[i]) * kGroupsPerTask));
      }
    });
  }
  return ys;
}

at::Tensor Bf16PairLinear(const at::Tensor& x, const at::Tensor& pairs, const at::Tensor& bias) {
  return Bf16PairLinears(x, {pairs}, {bias})[0];
}

}  // namespace placer::model

#pragma GCC diagnostic pop
