#include "model/generation_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/sampler.h"
#include "base/status_macros.h"

namespace placer::model {

struct GenerationEngine::Job {
  Job(const GenerationRequest& request, std::function<bool()> should_stop)
      : request(request),
        should_stop(std::move(should_stop)),
        sampler(request.sampling),
        history(request.prompt) {}

  const GenerationRequest request;
  const std::function<bool()> should_stop;  // asked on the engine thread, mutex_ held
  // The engine thread's alone.
  Sampler sampler;
  std::vector<int32_t> history;  // prompt and generated tokens
  std::unique_ptr<SequenceCache> sequence;
  size_t prefilled = 0;  // prompt tokens already in the cache
  uint32_t generated = 0;
  // Shared with the caller, under mutex_.
  std::deque<SampledToken> tokens;
  bool done = false;
  absl::StatusOr<FinishReason> outcome = FinishReason::kLength;
  bool abandoned = false;  // the caller left: the engine drops it at the next step
  bool admitted = false;   // left the queue for the running batch
  std::condition_variable progress;  // its caller waits for tokens or the end

  bool prefilling() const { return prefilled < request.prompt.size(); }
};

GenerationEngine::GenerationEngine(std::shared_ptr<const CausalLm> model,
                                         EngineLimits limits, StepObserver on_step)
    : model_(std::move(model)),
      limits_(limits),
      on_step_(std::move(on_step)),
      engine_([this] { RunEngine(); }) {}

GenerationEngine::~GenerationEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  engine_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  const absl::Status stopped = absl::UnavailableError("the model is being unloaded");
  for (auto& job : queue_) Finish(*job, stopped);
  for (auto& job : running_) Finish(*job, stopped);
}

void GenerationEngine::Finish(Job& job, absl::StatusOr<FinishReason> outcome) {
  if (job.done) return;
  job.done = true;
  job.outcome = std::move(outcome);
  job.progress.notify_all();
}

EngineFigures GenerationEngine::Figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return CurrentFigures();
}

absl::StatusOr<FinishReason> GenerationEngine::Generate(const GenerationRequest& request,
                                                        Clock::time_point deadline,
                                                        std::function<bool()> should_stop,
                                                        const TokenCallback& on_token) {
  PLACER_RETURN_IF_ERROR(ValidateGenerationRequest(request, *model_));
  if (request.max_new_tokens == 0) return FinishReason::kLength;

  auto job = std::make_shared<Job>(request, std::move(should_stop));
  std::unique_lock<std::mutex> lock(mutex_);
  // --max-queue counts requests waiting beyond the batch: free batch slots take some first,
  // unless the queue is held back for KV blocks (then every queued request waits).
  const int free_slots =
      held_for_blocks_ ? 0
                       : std::max(0, limits_.max_batch_size - static_cast<int>(running_.size()));
  if (static_cast<int>(queue_.size()) >= limits_.max_queue + free_slots) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "placerd is at capacity: ", running_.size(), " sequences running and ", queue_.size(),
        " requests queued (--max-queue ", limits_.max_queue, "); retry later or elsewhere"));
  }
  queue_.push_back(job);
  work_.notify_one();

  auto abandon = [&] {
    job->abandoned = true;
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
    work_.notify_one();
  };
  while (true) {
    // Woken by the engine for this job's tokens or end; the deadline needs no other wake-up.
    job->progress.wait_until(lock, deadline, [&] { return !job->tokens.empty() || job->done; });
    while (!job->tokens.empty()) {
      const SampledToken token = job->tokens.front();
      job->tokens.pop_front();
      lock.unlock();
      const TokenVerdict verdict = on_token(token);
      lock.lock();
      if (verdict != TokenVerdict::kContinue) {
        abandon();
        return verdict == TokenVerdict::kStop ? FinishReason::kStop : FinishReason::kCancelled;
      }
    }
    if (job->done) return job->outcome;
    if (Clock::now() >= deadline) {
      const bool queued = !job->admitted;
      abandon();
      return absl::DeadlineExceededError(absl::StrCat(
          "the deadline passed ", queued ? "while the request waited in the queue"
                                         : "while generating",
          " (", job->generated, " tokens generated)"));
    }
  }
}

void GenerationEngine::DropStopped() {
  auto stopped = [](const std::shared_ptr<Job>& job) {
    return !job->done && !job->abandoned && job->should_stop && job->should_stop();
  };
  for (auto& job : running_) {
    if (stopped(job)) Finish(*job, FinishReason::kCancelled);
  }
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (stopped(*it)) {
      Finish(**it, FinishReason::kCancelled);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

bool GenerationEngine::Admit() {
  // Finished and abandoned sequences give their KV blocks back here, on the engine thread,
  // which is the only one that touches them.
  for (auto& job : running_) {
    if (job->done || job->abandoned) job->sequence.reset();
  }
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::shared_ptr<Job>& job) {
                                  return job->done || job->abandoned;
                                }),
                 running_.end());
  // In arrival order, each with the KV blocks for its whole length, so that a running stream
  // never runs out later; the first that does not get them waits for blocks to come back.
  while (static_cast<int>(running_.size()) < limits_.max_batch_size && !queue_.empty()) {
    Job& job = *queue_.front();
    auto sequence = model_->NewSequence(static_cast<int64_t>(job.request.prompt.size()) +
                                        job.request.max_new_tokens);
    if (absl::IsResourceExhausted(sequence.status())) {
      held_for_blocks_ = true;
      PublishIfChanged();
      return false;
    }
    if (!sequence.ok()) {
      Finish(job, sequence.status());
    } else {
      job.sequence = *std::move(sequence);
      job.admitted = true;
      running_.push_back(queue_.front());
    }
    queue_.pop_front();
  }
  held_for_blocks_ = false;
  PublishIfChanged();
  return true;
}

EngineFigures GenerationEngine::CurrentFigures() const {
  return {static_cast<int>(queue_.size()), static_cast<int>(running_.size()), steps_};
}

bool GenerationEngine::Unpublished() const {
  const EngineFigures now = CurrentFigures();
  return now.queued != published_.queued || now.running != published_.running;
}

void GenerationEngine::PublishIfChanged() {
  if (!Unpublished()) return;
  published_ = CurrentFigures();
  if (on_step_) on_step_(0, published_);
}

void GenerationEngine::RunEngine() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Also wakes for a request that left the queue while nothing ran, to publish it.
    work_.wait(lock, [&] {
      return stopping_ || !queue_.empty() || !running_.empty() || Unpublished();
    });
    if (stopping_) return;
    DropStopped();
    const bool waiting_for_blocks = !Admit();
    if (running_.empty()) {
      // The last streams may have left between steps (cancelled, abandoned): the gauges must
      // not keep counting them.
      PublishIfChanged();
      // KV blocks held outside this scheduler: look again shortly.
      if (waiting_for_blocks) work_.wait_for(lock, std::chrono::milliseconds(10));
      continue;
    }
    std::vector<std::shared_ptr<Job>> running = running_;
    lock.unlock();
    const int step_sequences = Step(running);
    // Finished and abandoned sequences give their KV caches back on the engine thread,
    // which is the only one that touches them.
    for (auto& job : running) {
      bool release = false;
      {
        std::lock_guard<std::mutex> guard(mutex_);
        release = job->done || job->abandoned;
      }
      if (release) job->sequence.reset();
    }
    lock.lock();
    ++steps_;
    DropStopped();
    Admit();
    if (on_step_) {
      const EngineFigures after = CurrentFigures();
      published_ = after;
      lock.unlock();
      on_step_(step_sequences, after);
      lock.lock();
    }
  }
}

int GenerationEngine::Step(std::vector<std::shared_ptr<Job>>& running) {
  std::vector<Job*> ready;
  for (auto& job : running) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!job->done && !job->abandoned) ready.push_back(job.get());
  }
  // Decodes first (one token each), then prompt chunks in the token budget left.
  std::vector<CausalLm::SequenceStep> steps;
  std::vector<Job*> stepped;
  int budget = limits_.max_batch_tokens;
  for (Job* job : ready) {
    if (job->prefilling()) continue;
    steps.push_back({job->sequence.get(), {job->history.back()}});
    stepped.push_back(job);
    --budget;
  }
  for (Job* job : ready) {
    if (!job->prefilling() || budget <= 0) continue;
    const size_t chunk =
        std::min(job->request.prompt.size() - job->prefilled, static_cast<size_t>(budget));
    steps.push_back({job->sequence.get(),
                     {job->request.prompt.begin() + job->prefilled,
                      job->request.prompt.begin() + job->prefilled + chunk}});
    stepped.push_back(job);
    budget -= static_cast<int>(chunk);
  }
  if (steps.empty()) return 0;

  std::vector<std::vector<float>> rows(steps.size());
  std::vector<absl::Status> failures(steps.size());
  auto logits = model_->ExtendBatch(steps);
  const int64_t vocab = model_->vocab_size();
  if (logits.ok()) {
    for (size_t i = 0; i < steps.size(); ++i) {
      rows[i].assign(logits->values.begin() + i * vocab, logits->values.begin() + (i + 1) * vocab);
    }
  } else {
    // Find the request at fault: each alone, so one bad request does not fail the others.
    for (size_t i = 0; i < steps.size(); ++i) {
      auto alone = steps.size() == 1 ? logits : model_->ExtendBatch({steps[i]});
      if (alone.ok()) {
        rows[i] = std::move(alone->values);
      } else {
        failures[i] = alone.status();
      }
    }
  }

  for (size_t i = 0; i < steps.size(); ++i) {
    Job& job = *stepped[i];
    if (!failures[i].ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      Finish(job, failures[i]);
      continue;
    }
    if (job.prefilling()) {
      job.prefilled += steps[i].token_ids.size();
      if (job.prefilling()) continue;  // more prompt chunks to come before sampling
    }
    const SampledToken token = job.sampler.Next(rows[i], job.history);
    const auto& stops = job.request.stop_token_ids;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (std::find(stops.begin(), stops.end(), token.id) != stops.end()) {
        Finish(job, FinishReason::kStop);
        continue;
      }
      job.tokens.push_back(token);
      if (++job.generated >= job.request.max_new_tokens) Finish(job, FinishReason::kLength);
    }
    job.history.push_back(token.id);
    // After mutex_ is released: woken while the engine still held it, the caller would only go
    // back to sleep on the mutex, one more wake-up per token on cores the step is using. (Job
    // lives on in `running`.)
    job.progress.notify_all();
  }
  return static_cast<int>(steps.size());
}

}  // namespace placer::model
