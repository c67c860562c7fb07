#include "server/sequence_metrics.h"

namespace placer::server {

void SequenceMetrics::Start(uint64_t prompt_tokens) {
  if (started_) return;
  started_ = true;
  prompt_tokens_ = prompt_tokens;
  metrics_->SequenceStarted(prompt_tokens);
}

void SequenceMetrics::OnToken() {
  const Clock::time_point now = Clock::now();
  metrics_->TokenGenerated(std::chrono::duration<double>(now - last_token_).count(),
                           generated_tokens_ == 0);
  last_token_ = now;
  ++generated_tokens_;
}

}  // namespace placer::server
