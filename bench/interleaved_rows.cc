#include "bench/interleaved_rows.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics warn about themselves (_mm512_reduce_add_epi32's undefined
// halves; see model/small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/huge_page_tensor.h"
#include "model/packed_bf16_kernels.h"
#include "model/spinning_workers.h"

namespace placer::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBlockBytes = 72;  // float32 scale, float32 offset, 128 4-bit codes
constexpr int64_t kInputsPerBlock = 128;
constexpr int64_t kRowsPerTask = 64;
constexpr int64_t kRowsAhead = 4;  // as the decode kernel prefetches

// The two BF16 numbers of an input pair, as floats.
std::pair<float, float> Bf16Halves(uint32_t pair) {
  const uint32_t low = pair << 16, high = pair & 0xFFFF0000u;
  float a, b;
  std::memcpy(&a, &low, 4);
  std::memcpy(&b, &high, 4);
  return {a, b};
}

struct Weight {
  int64_t out, in;
  const uint8_t* bytes;
  int64_t row_bytes() const { return in / kInputsPerBlock * kBlockBytes; }
};

// Two codes of each dword, brought to bits 3-6 and 19-22, as BF16 1 + q/16 (0xEA: (a & b) | c).
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline __m512bh Nibbles(
    __m512i shifted) {
  return (__m512bh)_mm512_ternarylogic_epi32(shifted, _mm512_set1_epi32(0x00780078),
                                             _mm512_set1_epi32(0x3F803F80), 0xEA);
}

// Rows [n0, n1) of `w` stored R rows at a time, block g of row r of a group at (g R + r) blocks
// past the group's start (R = 1: placer's layout). Inputs are BF16 pairs in the order the
// decode kernel arranges them, 64 dwords a block; `sums` each block's input sum.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"))) void InterleavedRows(
    const Weight& w, const uint32_t* x, const float* sums, float* y, int64_t n0, int64_t n1) {
  const int64_t blocks = w.in / kInputsPerBlock;
  const int64_t row_bytes = w.row_bytes();
  for (int64_t n = n0; n < n1; n += R) {
    const uint8_t* group = w.bytes + n * row_bytes;
    const uint8_t* ahead = n + kRowsAhead < w.out ? group + kRowsAhead * row_bytes : group;
    __m512 acc[R];
    float offsets[R];
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_setzero_ps();
      offsets[r] = 0;
    }
    for (int64_t g = 0; g < blocks; ++g) {
      const uint32_t* xg = x + g * 64;
      const __m512bh x0 = (__m512bh)_mm512_loadu_si512(xg);
      const __m512bh x1 = (__m512bh)_mm512_loadu_si512(xg + 16);
      const __m512bh x2 = (__m512bh)_mm512_loadu_si512(xg + 32);
      const __m512bh x3 = (__m512bh)_mm512_loadu_si512(xg + 48);
      _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
        const int64_t at = (g * R + r) * kBlockBytes;
        _mm_prefetch(reinterpret_cast<const char*>(ahead + at), _MM_HINT_T0);
        const uint8_t* block = group + at;
        const __m512i codes = _mm512_loadu_si512(block + 8);
        __m512 dot = _mm512_dpbf16_ps(_mm512_setzero_ps(), Nibbles(_mm512_slli_epi32(codes, 3)), x0);
        dot = _mm512_dpbf16_ps(dot, Nibbles(_mm512_srli_epi32(codes, 1)), x1);
        dot = _mm512_dpbf16_ps(dot, Nibbles(_mm512_srli_epi32(codes, 5)), x2);
        dot = _mm512_dpbf16_ps(dot, Nibbles(_mm512_srli_epi32(codes, 9)), x3);
        const float scale = model::BlockScale(block);
        acc[r] = _mm512_fmadd_ps(dot, _mm512_set1_ps(scale), acc[r]);
        offsets[r] = __builtin_fmaf(__builtin_fmaf(-16.0f, scale, model::BlockOffset(block)),
                                    sums[g], offsets[r]);
      }
    }
    for (int r = 0; r < R; ++r) y[n + r] = 16.0f * _mm512_reduce_add_ps(acc[r]) + offsets[r];
  }
}

// The bytes of rows [n0, n1) summed as 32-bit integers: the read the kernels are measured against.
__attribute__((target("avx512f"))) void SumRows(const Weight& w, float* y, int64_t n0, int64_t n1) {
  const uint8_t* p = w.bytes + n0 * w.row_bytes();
  const uint8_t* end = w.bytes + n1 * w.row_bytes();
  __m512i a = _mm512_setzero_si512();
  __m512i b = _mm512_setzero_si512();
  for (; p + 128 <= end; p += 128) {
    a = _mm512_add_epi32(a, _mm512_loadu_si512(p));
    b = _mm512_add_epi32(b, _mm512_loadu_si512(p + 64));
  }
  y[n0] = static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(a, b)));
}

// Random BF16 inputs for `in` inputs as BF16 pairs (64 dwords a block), and each block's sum.
struct Inputs {
  std::vector<uint32_t> pairs;
  std::vector<float> sums;
};
Inputs RandomInputs(int64_t in, std::mt19937* random) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Inputs inputs;
  for (int64_t i = 0; i < in / 2; ++i) {
    uint32_t low, high;
    const float a = uniform(*random), b = uniform(*random);
    std::memcpy(&low, &a, 4);
    std::memcpy(&high, &b, 4);
    inputs.pairs.push_back((low >> 16) | (high & 0xFFFF0000u));  // truncated to BF16
  }
  for (int64_t g = 0; g < in / kInputsPerBlock; ++g) {
    double sum = 0;
    for (int64_t d = 0; d < 64; ++d) sum += Bf16Halves(inputs.pairs[g * 64 + d]).first +
                                            Bf16Halves(inputs.pairs[g * 64 + d]).second;
    inputs.sums.push_back(static_cast<float>(sum));
  }
  return inputs;
}

// Runs each interleaved kernel on one small weight laid out its way and compares every output
// with a float64 sum of fma(q, s, m) x over the same codes (the decode kernel's pairing of
// nibbles and inputs: bits 4k + 16h of code dword i go with half h of input dword 16k + i);
// throws if one is off by more than float32 sums allow. Returns the largest relative error.
double CheckKernels(std::mt19937* random) {
  constexpr int64_t kOut = 64, kIn = 512, kBlocks = kIn / kInputsPerBlock;
  const Inputs inputs = RandomInputs(kIn, random);
  std::vector<uint8_t> logical(kOut * kBlocks * kBlockBytes);
  for (uint8_t& byte : logical) byte = static_cast<uint8_t>((*random)());
  std::uniform_real_distribution<float> uniform(-0.1f, 0.1f);
  for (size_t block = 0; block < logical.size(); block += kBlockBytes) {
    const float scale = uniform(*random) + 0.11f, offset = uniform(*random);
    std::memcpy(&logical[block], &scale, 4);
    std::memcpy(&logical[block + 4], &offset, 4);
  }
  std::vector<double> reference(kOut), magnitude(kOut);
  for (int64_t n = 0; n < kOut; ++n) {
    for (int64_t g = 0; g < kBlocks; ++g) {
      const uint8_t* block = &logical[(n * kBlocks + g) * kBlockBytes];
      const float scale = model::BlockScale(block), offset = model::BlockOffset(block);
      for (int64_t i = 0; i < 16; ++i) {
        uint32_t codes;
        std::memcpy(&codes, block + 8 + 4 * i, 4);
        for (int k = 0; k < 4; ++k) {
          const auto [low, high] = Bf16Halves(inputs.pairs[g * 64 + 16 * k + i]);
          for (int h = 0; h < 2; ++h) {
            const double weight = std::fma(static_cast<float>((codes >> (4 * k + 16 * h)) & 15),
                                           scale, offset);
            const double term = weight * (h == 0 ? low : high);
            reference[n] += term;
            magnitude[n] += std::abs(term);
          }
        }
      }
    }
  }
  double worst = 0;
  for (const int rows : {1, 2, 4}) {
    std::vector<uint8_t> laid(logical.size());
    for (int64_t n = 0; n < kOut; ++n) {
      for (int64_t g = 0; g < kBlocks; ++g) {
        const int64_t at = ((n / rows) * rows * kBlocks + g * rows + n % rows) * kBlockBytes;
        std::memcpy(&laid[at], &logical[(n * kBlocks + g) * kBlockBytes], kBlockBytes);
      }
    }
    const Weight w{kOut, kIn, laid.data()};
    std::vector<float> y(kOut);
    if (rows == 1) InterleavedRows<1>(w, inputs.pairs.data(), inputs.sums.data(), y.data(), 0, kOut);
    if (rows == 2) InterleavedRows<2>(w, inputs.pairs.data(), inputs.sums.data(), y.data(), 0, kOut);
    if (rows == 4) InterleavedRows<4>(w, inputs.pairs.data(), inputs.sums.data(), y.data(), 0, kOut);
    for (int64_t n = 0; n < kOut; ++n) {
      const double error = std::abs(y[n] - reference[n]) / magnitude[n];
      if (!(error < 1e-4)) {
        throw std::runtime_error("interleaved-rows: the " + std::to_string(rows) +
                                 "-row kernel's output " + std::to_string(n) + " is " +
                                 std::to_string(y[n]) + ", float64 says " +
                                 std::to_string(reference[n]));
      }
      worst = std::max(worst, error);
    }
  }
  return worst;
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

}  // namespace

nlohmann::json MeasureInterleavedRows(int64_t bytes, int passes) {
  if (!model::PackedBf16KernelsRun()) {
    throw std::runtime_error("interleaved-rows needs AVX512-BF16, which this CPU lacks");
  }
  constexpr std::pair<int64_t, int64_t> kLayerShapes[] = {{2048, 2048}, {256, 2048}, {256, 2048},
                                                          {2048, 2048}, {5632, 2048}, {5632, 2048},
                                                          {2048, 5632}};
  std::vector<at::Tensor> storage;
  std::vector<Weight> weights;
  int64_t total = 0;
  while (total < bytes) {
    for (const auto& [out, in] : kLayerShapes) {
      const int64_t size = out * (in / kInputsPerBlock) * kBlockBytes;
      storage.push_back(loader::HugePageZeros({size}, at::kByte));
      uint8_t* data = storage.back().data_ptr<uint8_t>();
      for (int64_t k = 0; k < size; ++k) data[k] = static_cast<uint8_t>((k * 2654435761u) >> 13);
      const float scale = 0.01f;
      const float offset = -0.08f;
      for (int64_t block = 0; block < size; block += kBlockBytes) {
        std::memcpy(data + block, &scale, sizeof(scale));
        std::memcpy(data + block + 4, &offset, sizeof(offset));
      }
      weights.push_back({out, in, data});
      total += size;
    }
  }
  std::mt19937 random(1);
  const double largest_error = CheckKernels(&random);
  const Inputs inputs = RandomInputs(5632, &random);
  const uint32_t* x = inputs.pairs.data();
  const float* sums = inputs.sums.data();
  std::vector<float> y(5632);

  struct Variant {
    const char* name;
    void (*rows)(const Weight&, const uint32_t*, const float*, float*, int64_t, int64_t);
  };
  const Variant variants[] = {{"sum", nullptr},
                              {"1_row", InterleavedRows<1>},
                              {"2_rows_interleaved", InterleavedRows<2>},
                              {"4_rows_interleaved", InterleavedRows<4>}};
  model::SpinningWorkers& workers = model::SpinningWorkers::Shared();
  const auto pass = [&](const Variant& variant) {
    const Clock::time_point start = Clock::now();
    for (const Weight& w : weights) {
      const auto task = [&](int64_t begin, int64_t end) {
        const int64_t n0 = begin * kRowsPerTask;
        const int64_t n1 = std::min(w.out, end * kRowsPerTask);
        if (variant.rows == nullptr) {
          SumRows(w, y.data(), n0, n1);
        } else {
          variant.rows(w, x, sums, y.data(), n0, n1);
        }
      };
      const int64_t tasks = (w.out + kRowsPerTask - 1) / kRowsPerTask;
      if (!workers.TryRun(tasks, task)) task(0, tasks);
    }
    return static_cast<double>(total) / std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (const Variant& variant : variants) pass(variant);  // warm: helpers, the TLB
  std::vector<std::vector<double>> gbps(std::size(variants));
  std::vector<std::vector<double>> of_sum(std::size(variants));
  for (int p = 0; p < passes; ++p) {
    double sum_bps = 0;
    for (size_t v = 0; v < std::size(variants); ++v) {
      const double bps = pass(variants[v]);
      if (v == 0) sum_bps = bps;
      gbps[v].push_back(bps / 1e9);
      of_sum[v].push_back(bps / sum_bps);
    }
  }
  nlohmann::json results;
  for (size_t v = 0; v < std::size(variants); ++v) {
    results[variants[v].name] = {{"gbps", Quantile(gbps[v], 0.5)},
                                 {"of_sum",
                                  {{"p25", Quantile(of_sum[v], 0.25)},
                                   {"median", Quantile(of_sum[v], 0.5)},
                                   {"p75", Quantile(of_sum[v], 0.75)}}}};
  }
  return {{"threads", at::get_num_threads()}, {"bytes", total}, {"passes", passes},
          {"largest_relative_error", largest_error}, {"variants", results}};
}

}  // namespace placer::bench

#pragma GCC diagnostic pop
