#include "runtime/stage_pipeline.h"

#include "absl/strings/str_cat.h"

namespace placer::runtime {

StagePipeline::StagePipeline(std::shared_ptr<StageLink> link,
                             std::function<void(const absl::Status&)> on_broken)
    : link_(std::move(link)), on_broken_(std::move(on_broken)) {}

StagePipeline::~StagePipeline() { Stop(); }

void StagePipeline::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (broken_.ok()) broken_ = absl::UnavailableError("the pipeline stopped (placerd is exiting)");
  }
  changed_.notify_all();
  // The receiver notices at the next heartbeat, or within one timeout.
  link_->Close();
  if (receiver_.joinable()) receiver_.join();
}

void StagePipeline::Start() {
  answer_buffer_ = HopBuffer(link_->receive_buffers_pinned());
  link_->StartHeartbeats(1);
  receiver_ = std::thread([this] { ReceiveAnswers(); });
}

void StagePipeline::ReceiveAnswers() {
  const int last = link_->size() - 1;
  while (true) {
    absl::StatusOr<StageMessage> message = link_->Receive(last);
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (!message.ok()) {
      lock.unlock();
      Break(message.status());
      return;
    }
    if (!awaiting_) {
      const absl::Status unasked = absl::UnavailableError(
          absl::StrCat(StageLink::StageName(last, link_->size()), ": answered step ",
                       message->step, " while no step was awaited"));
      lock.unlock();
      Break(unasked);
      return;
    }
    awaiting_ = false;
    answer_ = *std::move(message);
    if (answer_.hidden.defined()) {
      at::Tensor received = answer_.hidden;
      answer_.hidden = answer_buffer_.Take(received.numel(), received.scalar_type())
                           .view(received.sizes())
                           .copy_(received);
    }
    has_answer_ = true;
    changed_.notify_all();
  }
}

void StagePipeline::Break(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_.ok()) return;
    broken_ = status;
  }
  changed_.notify_all();
  if (on_broken_) on_broken_(status);
}

absl::Status StagePipeline::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

absl::StatusOr<at::Tensor> StagePipeline::Carry(const std::vector<int64_t>& layout,
                                                const at::Tensor& hidden) {
  std::lock_guard<std::mutex> carry(carry_mutex_);
  if (absl::Status status = health(); !status.ok()) return status;
  const int64_t step = ++step_;
  const auto started = std::chrono::steady_clock::now();
  struct Timer {
    std::atomic<uint64_t>& total;
    std::chrono::steady_clock::time_point started;
    ~Timer() {
      total += std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - started).count();
    }
  } timer{wait_ns_, started};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    awaiting_ = true;
  }
  absl::Status sent = link_->Send(1, {StageMessageKind::kStep, step, layout, hidden, ""});
  if (!sent.ok()) {
    Break(sent);
    return sent;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !broken_.ok() || has_answer_; });
  if (!has_answer_) return broken_;
  has_answer_ = false;
  StageMessage answer = std::move(answer_);
  if (answer.step != step) {
    const absl::Status out_of_order = absl::UnavailableError(
        absl::StrCat(StageLink::StageName(link_->size() - 1, link_->size()), ": answered step ",
                     answer.step, " while step ", step, " was awaited"));
    lock.unlock();
    Break(out_of_order);
    return out_of_order;
  }
  if (answer.kind == StageMessageKind::kStepFailed) {
    return absl::InternalError(absl::StrCat("a later stage failed the step: ", answer.error));
  }
  return answer.hidden;
}

void StagePipeline::RollBackLastStep() {
  std::lock_guard<std::mutex> carry(carry_mutex_);
  if (!health().ok() || step_ == 0) return;
  absl::Status sent = link_->Send(1, {StageMessageKind::kRollback, step_, {}, at::Tensor(), ""});
  if (!sent.ok()) Break(sent);
}

void PipelineHook::EndPass(at::Tensor* output) {
  // A pass that ended with its output may still be abandoned (Pass::Abandon): stay armed.
  if (output != nullptr || !carried_) return;
  carried_ = false;
  pipeline_->RollBackLastStep();
}

void PipelineHook::Exit(BlockCall& call) {
  if (call.block != boundary_block_ || call.activations.empty()) return;
  carried_ = true;
  at::Tensor& hidden = *call.activations.front();
  static const std::vector<int64_t> kNoLayout;
  absl::StatusOr<at::Tensor> carried =
      pipeline_->Carry(call.layout != nullptr ? *call.layout : kNoLayout, send_buffer_.ToHost(hidden));
  if (!carried.ok()) {
    if (absl::IsUnavailable(carried.status())) {
      throw StageUnavailable(std::string(carried.status().message()));
    }
    throw std::runtime_error(std::string(carried.status().message()));
  }
  hidden = *std::move(carried);
}

}  // namespace placer::runtime
