// Concurrent gRPC clients against a running placerd: Generate streams (time to first token,
// every token's arrival, aggregate tokens/s) and unary Forward calls (latency, requests/s).
// Every client is connected and warmed before a common start, so connection set-up is not
// counted.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include <nlohmann/json.hpp>

namespace placer::bench {

struct StreamArgs {
  std::string target;
  int streams = 1;
  int prompt_tokens = 16;
  int new_tokens = 32;  // ignore_eos: every stream generates exactly this many
  int64_t vocab = 0;
  int variant = 0;      // varies the prompts between runs
  // Sampling (placer.v1 SamplingParams): 0 is greedy; the seed is fixed per stream.
  float temperature = 0;
  float top_p = 1;
  uint32_t top_k = 0;
};

// {"streams", "aggregate_tokens_per_second", "wall_seconds", "ttft_seconds": [per stream],
//  "step_seconds": [[per stream: gaps between tokens]], "tokens": [[...]]}.
absl::StatusOr<nlohmann::json> RunGenerateStreams(const StreamArgs& args);

struct UnaryArgs {
  std::string target;
  int tokens = 8;
  int iterations = 300;  // calls per client
  int clients = 1;
  int64_t vocab = 0;
};

// {"latency_seconds": [...], "latency": summary, "requests_per_second", "wall_seconds"}.
absl::StatusOr<nlohmann::json> RunUnaryForward(const UnaryArgs& args);

}  // namespace placer::bench
