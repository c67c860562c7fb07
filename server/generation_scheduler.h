// Continuous batching: one engine thread runs every admitted generation in shared forward
// passes. Requests join the running batch at the next step and leave it when done; prompts
// are prefilled in chunks so that running streams keep decoding; a bounded queue holds the
// requests beyond --max-batch-size or beyond the free KV-cache blocks, and a full queue is
// refused at once. Callers block in
// Generate() and receive their tokens on their own thread, as GenerateTokens would give them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "model/causal_lm.h"
#include "model/generation.h"

namespace placer::server {

struct SchedulerLimits {
  int max_batch_size = 8;     // sequences running at once (each holds its KV blocks meanwhile)
  int max_batch_tokens = 256; // tokens in one forward pass: decodes first, then prefill chunks
  int max_queue = 64;         // requests waiting beyond the running batch
};

struct SchedulerFigures {
  int queued = 0;
  int running = 0;
  uint64_t steps = 0;
};

class GenerationScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // After every step: the sequences that step advanced together, and running/queued after it
  // (for the batch-size histogram and the queue and running gauges); also with 0 sequences
  // when requests join the batch, before their first tokens (called with the lock held then,
  // so it must not call back into the scheduler).
  using StepObserver = std::function<void(int step_sequences, const SchedulerFigures& after)>;

  GenerationScheduler(std::shared_ptr<const model::CausalLm> model, SchedulerLimits limits,
                      StepObserver on_step = nullptr);
  // Stops the engine; requests still queued or running end with UNAVAILABLE.
  ~GenerationScheduler();
  GenerationScheduler(const GenerationScheduler&) = delete;
  GenerationScheduler& operator=(const GenerationScheduler&) = delete;

  // Validates, queues and runs `request`, calling `on_token` on the caller's thread for each
  // generated token (a stop token ends generation and is not passed on). Returns when it
  // finishes: kCancelled once `on_token` returns false or `should_stop` turns true (checked
  // while waiting, so also while queued); DEADLINE_EXCEEDED past `deadline`; RESOURCE_EXHAUSTED
  // at once when the queue is full; a failed step fails only the request at fault.
  absl::StatusOr<model::FinishReason> Generate(
      const model::GenerationRequest& request, Clock::time_point deadline,
      const std::function<bool()>& should_stop,
      const std::function<bool(const model::SampledToken&)>& on_token);

  SchedulerFigures Figures() const;

 private:
  struct Job;

  void RunEngine();
  // Moves queued requests into the running batch while there is room and KV blocks; false
  // when the first waiting one is held back for blocks. mutex_ held, engine thread only.
  bool Admit(std::unique_lock<std::mutex>& lock);
  void PublishAdmissions(bool admitted);  // mutex_ held
  int Step(std::vector<std::shared_ptr<Job>>& running);  // sequences advanced
  void Finish(Job& job, absl::StatusOr<model::FinishReason> outcome);  // mutex_ held

  std::shared_ptr<const model::CausalLm> model_;
  const SchedulerLimits limits_;
  StepObserver on_step_;

  mutable std::mutex mutex_;
  std::condition_variable work_;     // the engine waits for requests
  std::condition_variable progress_; // callers wait for tokens
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;
  uint64_t steps_ = 0;
  bool stopping_ = false;
  std::thread engine_;
};

}  // namespace placer::server
