// What every bench binary shares: one clock, sample summaries, /proc figures and the prompt
// token ids (bench/peers/torch_eager_decode.py computes the same ids, so both sides run the
// same prompt). Torch-free, so the gRPC bench links without libtorch.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace placer::bench {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to);

// {"count", "median", "min", "max", "mean", "p99"} of the samples; empty samples give count 0.
nlohmann::json Summary(std::vector<double> samples);

// The Vm* and Rss* fields of /proc/<pid>/status (or /proc/self/status) in bytes.
std::map<std::string, int64_t> ProcStatusBytes(const std::string& pid = "self");
int64_t StatusField(const std::map<std::string, int64_t>& fields, const std::string& key);

// `count` token ids in [0, vocab): id_i = (variant * 7919 + i * 104729 + 1) mod vocab.
std::vector<int32_t> PromptTokens(int count, int64_t vocab, int variant = 0);

// Prints `result` as one line of JSON on stdout (what bench/run reads).
void PrintJson(const nlohmann::json& result);

}  // namespace placer::bench
