#include "bench/loop_handoff.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "model/spinning_workers.h"

namespace placer::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Spins for `ns`: a task whose length does not depend on caches or memory.
void BusyFor(int64_t ns) {
  const Clock::time_point until = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < until) {
  }
}

}  // namespace

nlohmann::json MeasureLoopHandoff(int loops, int batches) {
  model::SpinningWorkers& workers = model::SpinningWorkers::Shared();
  const int threads = at::get_num_threads();
  nlohmann::json points = nlohmann::json::array();
  for (const int64_t tasks : {2, 8, 16, 32, 86}) {
    for (const int64_t task_ns : {0, 1000, 4000}) {
      const model::SpinningWorkers::RangeFn fn = [&](int64_t begin, int64_t end) {
        BusyFor(task_ns * (end - begin));
      };
      const auto run = [&] {
        if (!workers.TryRun(tasks, fn)) fn(0, tasks);
      };
      for (int i = 0; i < std::max(1, loops / 10); ++i) run();  // the helpers awake and spinning
      std::vector<double> loop_us;
      for (int b = 0; b < batches; ++b) {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < loops; ++i) run();
        loop_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                          loops);
      }
      std::sort(loop_us.begin(), loop_us.end());
      const double median = loop_us[loop_us.size() / 2];
      const double ideal = static_cast<double>(tasks * task_ns) / 1e3 / threads;
      points.push_back({{"tasks", tasks},
                        {"task_us", static_cast<double>(task_ns) / 1e3},
                        {"loop_us", median},
                        {"ideal_us", ideal},
                        {"overhead_us", median - ideal}});
    }
  }
  return {{"threads", threads}, {"loops", loops}, {"batches", batches}, {"points", points}};
}

}  // namespace placer::bench
