#include "bench/bench_common.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>

namespace placer::bench {

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

nlohmann::json Summary(std::vector<double> samples) {
  if (samples.empty()) return {{"count", 0}};
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  const double median =
      n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
  // Nearest rank: the smallest sample with at least 99% of the samples at or below it.
  const size_t p99_rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n)));
  return {{"count", n},
          {"median", median},
          {"min", samples.front()},
          {"max", samples.back()},
          {"mean", std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n)},
          {"p99", samples[std::max<size_t>(p99_rank, 1) - 1]}};
}

std::map<std::string, int64_t> ProcStatusBytes(const std::string& pid) {
  std::map<std::string, int64_t> fields;
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key.rfind("Vm", 0) != 0 && key.rfind("Rss", 0) != 0) continue;
    const size_t kb = line.find(" kB", colon);
    if (kb == std::string::npos) continue;
    try {
      fields[key] = std::stoll(line.substr(colon + 1, kb - colon - 1)) * 1024;
    } catch (const std::exception&) {
      // A field we cannot read is left out; StatusField reports it as -1.
    }
  }
  return fields;
}

int64_t StatusField(const std::map<std::string, int64_t>& fields, const std::string& key) {
  const auto it = fields.find(key);
  return it == fields.end() ? -1 : it->second;
}

std::vector<int32_t> PromptTokens(int count, int64_t vocab, int variant) {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const int64_t id = (static_cast<int64_t>(variant) * 7919 + static_cast<int64_t>(i) * 104729 + 1) % vocab;
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

void PrintJson(const nlohmann::json& result) { std::cout << result.dump() << std::endl; }

}  // namespace placer::bench
