// The one generation engine: continuous batching. One engine thread runs every admitted
// generation in shared forward passes; requests join the running batch at the next step and
// leave it when done; prompts are prefilled in chunks so that running streams keep decoding; a
// bounded queue holds the requests beyond max_batch_size or beyond the free KV-cache blocks,
// and a full queue is refused at once. A request of one is a batch of one: there is no other
// decode loop. No gRPC here: the server's protocols are callers.
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

namespace placer::model {

struct EngineLimits {
  int max_batch_size = 8;     // sequences running at once (each holds its KV blocks meanwhile)
  int max_batch_tokens = 256; // tokens in one forward pass: decodes first, then prefill chunks
  int max_queue = 64;         // requests waiting beyond the running batch
};

struct EngineFigures {
  int queued = 0;
  int running = 0;
  uint64_t steps = 0;
};

class GenerationEngine {
 public:
  using Clock = std::chrono::steady_clock;
  // After every step: the sequences that step advanced together, and running/queued after it
  // (for the batch-size histogram and the queue and running gauges); also with 0 sequences
  // whenever running or queued changed between steps (called with the lock held then, so it
  // must not call back into the engine).
  using StepObserver = std::function<void(int step_sequences, const EngineFigures& after)>;
  // Called on the caller's thread for each generated token (a stop token id ends generation
  // and is not passed on); the answer says whether generation goes on.
  using TokenCallback = std::function<TokenVerdict(const SampledToken&)>;

  GenerationEngine(std::shared_ptr<const CausalLm> model, EngineLimits limits,
                   StepObserver on_step = nullptr);
  // Stops the engine; requests still queued or running end with UNAVAILABLE.
  ~GenerationEngine();
  GenerationEngine(const GenerationEngine&) = delete;
  GenerationEngine& operator=(const GenerationEngine&) = delete;

  // Validates `request` (ValidateGenerationRequest: the one check), queues and runs it, and
  // returns when it finishes: kStop at a stop token id or when `on_token` answers kStop;
  // kCancelled when it answers kCancel or `should_stop` turns true; DEADLINE_EXCEEDED past
  // `deadline` (also while queued); RESOURCE_EXHAUSTED at once when the queue is full; a failed
  // step fails only the request at fault. `should_stop` runs on the engine thread, once a
  // step for every queued and running request, so a cancelled client leaves within one step
  // and gives its KV blocks back; it must be thread-safe and cheap.
  absl::StatusOr<FinishReason> Generate(const GenerationRequest& request,
                                        Clock::time_point deadline,
                                        std::function<bool()> should_stop,
                                        const TokenCallback& on_token);

  EngineFigures Figures() const;

 private:
  struct Job;

  void RunEngine();
  // Moves queued requests into the running batch while there is room and KV blocks; false
  // when the first waiting one is held back for blocks. mutex_ held, engine thread only.
  bool Admit();
  void DropStopped();  // mutex_ held: requests whose caller stopped them
  // mutex_ held. The observer hears running/queued whenever they changed since it last heard
  // them, also between steps: when requests join the batch (before their first tokens, so a
  // client holding one sees itself counted) and when the last streams leave.
  void PublishIfChanged();
  bool Unpublished() const;             // mutex_ held
  EngineFigures CurrentFigures() const;  // mutex_ held
  int Step(std::vector<std::shared_ptr<Job>>& running);  // sequences advanced
  void Finish(Job& job, absl::StatusOr<FinishReason> outcome);  // mutex_ held

  std::shared_ptr<const CausalLm> model_;
  const EngineLimits limits_;
  StepObserver on_step_;

  mutable std::mutex mutex_;
  std::condition_variable work_;  // the engine waits for requests
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;
  uint64_t steps_ = 0;
  EngineFigures published_;  // what on_step_ heard last
  bool held_for_blocks_ = false;  // the first queued request waits for KV blocks
  bool stopping_ = false;
  std::thread engine_;
};

}  // namespace placer::model
