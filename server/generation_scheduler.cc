#include "server/generation_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/sampler.h"

namespace placer::server {

struct GenerationScheduler::Job {
  explicit Job(const model::GenerationRequest& request)
      : request(request), sampler(request.sampling), history(request.prompt) {}

  const model::GenerationRequest request;
  // The engine thread's alone.
  model::Sampler sampler;
  std::vector<int32_t> history;  // prompt and generated tokens
  std::unique_ptr<model::SequenceCache> sequence;
  size_t prefilled = 0;  // prompt tokens already in the cache
  uint32_t generated = 0;
  // Shared with the caller, under mutex_.
  std::deque<model::SampledToken> tokens;
  bool done = false;
  absl::StatusOr<model::FinishReason> outcome = model::FinishReason::kLength;
  bool abandoned = false;  // the caller left: the engine drops it at the next step
  bool admitted = false;   // left the queue for the running batch

  bool prefilling() const { return prefilled < request.prompt.size(); }
};

GenerationScheduler::GenerationScheduler(std::shared_ptr<const model::CausalLm> model,
                                         SchedulerLimits limits, StepObserver on_step)
    : model_(std::move(model)),
      limits_(limits),
      on_step_(std::move(on_step)),
      engine_([this] { RunEngine(); }) {}

GenerationScheduler::~GenerationScheduler() {
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
  progress_.notify_all();
}

void GenerationScheduler::Finish(Job& job, absl::StatusOr<model::FinishReason> outcome) {
  if (job.done) return;
  job.done = true;
  job.outcome = std::move(outcome);
}

SchedulerFigures GenerationScheduler::Figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {static_cast<int>(queue_.size()), static_cast<int>(running_.size()), steps_};
}

absl::StatusOr<model::FinishReason> GenerationScheduler::Generate(
    const model::GenerationRequest& request, Clock::time_point deadline,
    const std::function<bool()>& should_stop,
    const std::function<bool(const model::SampledToken&)>& on_token) {
  if (absl::Status status = model::ValidateSamplingParams(request.sampling, model_->vocab_size());
      !status.ok()) {
    return status;
  }
  const int64_t needed =
      static_cast<int64_t>(request.prompt.size()) + static_cast<int64_t>(request.max_new_tokens);
  if (needed > model_->max_positions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.max_new_tokens: the prompt (", request.prompt.size(), " tokens) plus ",
        request.max_new_tokens, " new tokens exceed the ", model_->max_positions(),
        " positions a sequence may have (the model's context, or --max-seq-len)"));
  }
  if (request.max_new_tokens == 0) return model::FinishReason::kLength;

  auto job = std::make_shared<Job>(request);
  std::unique_lock<std::mutex> lock(mutex_);
  if (static_cast<int>(queue_.size()) >= limits_.max_queue) {
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
    // Wakes for tokens, and at least every 50 ms to notice a cancelled client.
    progress_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)),
                         [&] { return !job->tokens.empty() || job->done; });
    while (!job->tokens.empty()) {
      const model::SampledToken token = job->tokens.front();
      job->tokens.pop_front();
      lock.unlock();
      const bool more = on_token(token);
      lock.lock();
      if (!more) {
        abandon();
        return model::FinishReason::kCancelled;
      }
    }
    if (job->done) return job->outcome;
    if (should_stop && should_stop()) {
      abandon();
      return model::FinishReason::kCancelled;
    }
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

bool GenerationScheduler::Admit(std::unique_lock<std::mutex>&) {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::shared_ptr<Job>& job) {
                                  return job->done || job->abandoned;
                                }),
                 running_.end());
  // In arrival order, each with the KV blocks for its whole length, so that a running stream
  // never runs out later; the first that does not get them waits for blocks to come back.
  bool admitted = false;
  while (static_cast<int>(running_.size()) < limits_.max_batch_size && !queue_.empty()) {
    Job& job = *queue_.front();
    auto sequence = model_->NewSequence(static_cast<int64_t>(job.request.prompt.size()) +
                                        job.request.max_new_tokens);
    if (absl::IsResourceExhausted(sequence.status())) {
      PublishAdmissions(admitted);
      return false;
    }
    if (!sequence.ok()) {
      Finish(job, sequence.status());
      progress_.notify_all();
    } else {
      job.sequence = *std::move(sequence);
      job.admitted = true;
      running_.push_back(queue_.front());
    }
    queue_.pop_front();
    admitted = true;
  }
  PublishAdmissions(admitted);
  return true;
}

void GenerationScheduler::PublishAdmissions(bool admitted) {
  // Before the new streams' first tokens: a client holding one sees itself counted running.
  if (admitted && on_step_) {
    on_step_(0, {static_cast<int>(queue_.size()), static_cast<int>(running_.size()), steps_});
  }
}

void GenerationScheduler::RunEngine() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
    if (stopping_) return;
    if (!Admit(lock) && running_.empty()) {
      // KV blocks held outside this scheduler: look again shortly.
      work_.wait_for(lock, std::chrono::milliseconds(10));
      continue;
    }
    if (running_.empty()) continue;
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
    Admit(lock);
    if (on_step_) {
      const SchedulerFigures after{static_cast<int>(queue_.size()),
                                   static_cast<int>(running_.size()), steps_};
      lock.unlock();
      on_step_(step_sequences, after);
      lock.lock();
    }
  }
}

int GenerationScheduler::Step(std::vector<std::shared_ptr<Job>>& running) {
  std::vector<Job*> ready;
  for (auto& job : running) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!job->done && !job->abandoned) ready.push_back(job.get());
  }
  // Decodes first (one token each), then prompt chunks in the token budget left.
  std::vector<model::CausalLm::SequenceStep> steps;
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
    const model::SampledToken token = job.sampler.Next(rows[i], job.history);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& stops = job.request.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), token.id) != stops.end()) {
      Finish(job, model::FinishReason::kStop);
      continue;
    }
    job.tokens.push_back(token);
    job.history.push_back(token.id);
    if (++job.generated >= job.request.max_new_tokens) Finish(job, model::FinishReason::kLength);
  }
  progress_.notify_all();
  return static_cast<int>(steps.size());
}

}  // namespace placer::server
