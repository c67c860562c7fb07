#include "bench/stream_prefetch.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace placer::bench {
namespace {

constexpr int64_t kIn = 768;  // the small preset's hidden size

using Clock = std::chrono::steady_clock;

struct Sweep {
  const float* weight;
  const float* x;
  float* y;
  int64_t rows;
  int64_t distance_floats;  // 0: no prefetch
};

// Rows [r0, r1): a chain of FMAs per row, as model/small_batch_out_in.cc's Tile512<1, 1>.
__attribute__((target("avx512f,fma"))) void Rows512(const Sweep& s, int64_t r0, int64_t r1) {
  const float* end = s.weight + s.rows * kIn;
  for (int64_t n = r0; n < r1; ++n) {
    const float* w = s.weight + n * kIn;
    const float* ahead = end - w >= s.distance_floats + kIn ? w + s.distance_floats : w;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < kIn; k += 16) {
      if (s.distance_floats > 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T0);
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(s.x + k), acc);
    }
    s.y[n] = _mm512_reduce_add_ps(acc);
  }
}

__attribute__((target("avx2,fma"))) void Rows256(const Sweep& s, int64_t r0, int64_t r1) {
  const float* end = s.weight + s.rows * kIn;
  for (int64_t n = r0; n < r1; ++n) {
    const float* w = s.weight + n * kIn;
    const float* ahead = end - w >= s.distance_floats + kIn ? w + s.distance_floats : w;
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    for (int64_t k = 0; k < kIn; k += 16) {
      if (s.distance_floats > 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T0);
      a = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(s.x + k), a);
      b = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 8), _mm256_loadu_ps(s.x + k + 8), b);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(a, b));
    float sum = 0;
    for (float lane : lanes) sum += lane;
    s.y[n] = sum;
  }
}

bool HasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

// A reusable spinning barrier for the measuring threads (C++17 has none).
class SpinBarrier {
 public:
  explicit SpinBarrier(int parties) : parties_(parties) {}
  void Wait() {
    const int generation = generation_.load();
    if (arrived_.fetch_add(1) + 1 == parties_) {
      arrived_.store(0);
      generation_.fetch_add(1);
    } else {
      while (generation_.load() == generation) std::this_thread::yield();
    }
  }

 private:
  const int parties_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

}  // namespace

nlohmann::json MeasureStreamPrefetch(int64_t bytes, int threads, int pairs,
                                     const std::vector<int64_t>& distances) {
  const int64_t rows = std::max<int64_t>(threads, bytes / (kIn * 4));
  std::vector<float> weight(static_cast<size_t>(rows * kIn));
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 1e-3f * static_cast<float>(i % 97);
  std::vector<float> x(kIn, 1.0f), y(static_cast<size_t>(rows));
  const bool avx512 = HasAvx512();
  const double gigabytes = static_cast<double>(rows * kIn * 4) / 1e9;
  nlohmann::json result = {{"bytes", rows * kIn * 4},
                           {"threads", threads},
                           {"isa", avx512 ? "avx512" : "avx2"},
                           {"distances", nlohmann::json::array()}};
  for (const int64_t distance : distances) {
    // [0]: plain, [1]: prefetched; per pair.
    std::vector<double> seconds[2];
    seconds[0].assign(static_cast<size_t>(pairs), 0.0);
    seconds[1].assign(static_cast<size_t>(pairs), 0.0);
    std::vector<Clock::time_point> starts(static_cast<size_t>(threads)),
        ends(static_cast<size_t>(threads));
    SpinBarrier barrier(threads);
    auto worker = [&](int t) {
      const int64_t share = (rows + threads - 1) / threads;
      const int64_t r0 = std::min(rows, t * share), r1 = std::min(rows, r0 + share);
      for (int pass = 0; pass < 2 * pairs + 2; ++pass) {
        // Two warm passes, then pairs whose order alternates.
        const int pair = pass / 2 - 1;
        const int prefetched = (pass + std::max(pair, 0)) % 2;
        const Sweep sweep{weight.data(), x.data(), y.data(), rows,
                          prefetched != 0 ? distance / 4 : 0};
        barrier.Wait();
        starts[static_cast<size_t>(t)] = Clock::now();
        if (avx512) {
          Rows512(sweep, r0, r1);
        } else {
          Rows256(sweep, r0, r1);
        }
        ends[static_cast<size_t>(t)] = Clock::now();
        barrier.Wait();
        if (t == 0 && pair >= 0) {
          const auto first = *std::min_element(starts.begin(), starts.end());
          const auto last = *std::max_element(ends.begin(), ends.end());
          seconds[prefetched][static_cast<size_t>(pair)] =
              std::chrono::duration<double>(last - first).count();
        }
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (auto& thread : pool) thread.join();
    std::vector<double> speedup;
    for (int i = 0; i < pairs; ++i) {
      speedup.push_back(seconds[0][static_cast<size_t>(i)] / seconds[1][static_cast<size_t>(i)]);
    }
    result["distances"].push_back(
        {{"distance_bytes", distance},
         {"plain_gbps", gigabytes / Median(seconds[0])},
         {"prefetch_gbps", gigabytes / Median(seconds[1])},
         {"plain_best_gbps", gigabytes / *std::min_element(seconds[0].begin(), seconds[0].end())},
         {"prefetch_best_gbps", gigabytes / *std::min_element(seconds[1].begin(), seconds[1].end())},
         {"speedup",
          {{"p25", Quantile(speedup, 0.25)}, {"median", Median(speedup)}, {"p75", Quantile(speedup, 0.75)}}}});
  }
  // Keeps the products alive.
  result["checksum"] = y[0] + y[static_cast<size_t>(rows - 1)];
  return result;
}

}  // namespace placer::bench

#pragma GCC diagnostic pop
