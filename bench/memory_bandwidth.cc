#include "bench/memory_bandwidth.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/host_copy.h"

namespace placer::bench {
namespace {

template <typename Pass>
nlohmann::json Time(int64_t bytes, int runs, Pass pass) {
  pass();  // warm: first touch of the buffers, thread pool start
  std::vector<double> seconds;
  for (int run = 0; run < runs; ++run) {
    const Clock::time_point start = Clock::now();
    pass();
    seconds.push_back(Seconds(start, Clock::now()));
  }
  const nlohmann::json summary = Summary(seconds);
  return {{"seconds", seconds},
          {"summary", summary},
          {"bytes_per_second", static_cast<double>(bytes) / summary["median"].get<double>()},
          // The fastest pass: what the machine can do, which a floor needs (a median moved
          // between 39.8 and 63.6 GB/s of reads from one bench run to the next on 2 shared vCPUs).
          {"best_bytes_per_second", static_cast<double>(bytes) / summary["min"].get<double>()}};
}

}  // namespace

nlohmann::json MeasureMemoryBandwidth(int64_t bytes, int runs) {
  const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
  const at::Tensor source = at::rand({elements}, at::kFloat);
  at::Tensor destination = at::empty_like(source);
  destination.zero_();
  double sink = 0;
  nlohmann::json result = {{"bytes", elements * static_cast<int64_t>(sizeof(float))},
                           {"threads", at::get_num_threads()}};
  result["copy"] = Time(bytes, runs, [&] { destination.copy_(source); });
  // What staging onto a virtual GPU uses (one thread, streaming stores).
  result["staging_copy"] = Time(bytes, runs, [&] {
    runtime::CopyHostBytes(destination.data_ptr(), source.data_ptr(),
                             static_cast<size_t>(source.nbytes()));
  });
  result["clone"] = Time(bytes, runs, [&] { sink += source.clone().data_ptr<float>()[0]; });
  result["read"] = Time(bytes, runs, [&] { sink += source.sum().item<double>(); });
  result["checksum"] = sink;
  return result;
}

ReadProbe::ReadProbe(int64_t bytes)
    : source_(at::rand({std::max<int64_t>(1, bytes / static_cast<int64_t>(sizeof(float)))},
                       at::kFloat)) {
  BytesPerSecond();  // warm: the intra-op threads' start
}

int64_t ReadProbe::bytes() const { return source_.nbytes(); }

double ReadProbe::BytesPerSecond() {
  const Clock::time_point start = Clock::now();
  sink_ += source_.sum().item<double>();
  return static_cast<double>(bytes()) / Seconds(start, Clock::now());
}

}  // namespace placer::bench
