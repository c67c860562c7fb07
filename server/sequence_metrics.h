// One generated sequence as the metrics see it: prompt tokens when it starts, then time to
// first token and inter-token latency per token. One per sequence, so that sequences that
// share an RPC (several requests on one ModelStreamInfer stream) keep their own clocks.
#pragma once

#include <chrono>
#include <cstdint>

#include "server/metrics.h"

namespace placer::server {

class SequenceMetrics {
 public:
  explicit SequenceMetrics(DaemonMetrics* metrics) : metrics_(metrics), last_token_(Clock::now()) {}

  // The sequence starts generating from a prompt of this many tokens (counted once).
  void Start(uint64_t prompt_tokens);
  // One token reached the client.
  void OnToken();

  bool started() const { return started_; }
  uint64_t prompt_tokens() const { return prompt_tokens_; }
  uint64_t generated_tokens() const { return generated_tokens_; }

 private:
  using Clock = std::chrono::steady_clock;

  DaemonMetrics* metrics_;
  Clock::time_point last_token_;  // the request's arrival until the first token
  bool started_ = false;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
};

}  // namespace placer::server
