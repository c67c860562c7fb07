// The leader's side of a pipeline group: one hook on the boundary block (the last block the
// leader runs before the other stages' decoder layers) carries the pass's hidden states and
// rows to stage 1 and puts the last stage's answer in their place, so the model's code never
// knows the other stages exist beyond skipping their blocks. A stage that fails breaks the
// pipeline for good: every pass from then on fails with UNAVAILABLE naming it, and the owner
// is told once (placerd turns health NOT_SERVING and exits non-zero, so the group restarts).
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/block_hook.h"
#include "runtime/hop_buffer.h"
#include "runtime/stage_link.h"

namespace placer::runtime {

// Thrown through the model's pass when another stage failed; the model answers UNAVAILABLE.
class StageUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class StagePipeline {
 public:
  // `link` is rank 0's. `on_broken` runs once, on the receiver thread, with the first failure.
  StagePipeline(std::shared_ptr<StageLink> link,
                std::function<void(const absl::Status&)> on_broken);
  ~StagePipeline();
  StagePipeline(const StagePipeline&) = delete;
  StagePipeline& operator=(const StagePipeline&) = delete;

  // Heartbeats to stage 1 and the receiver of the last stage's answers and heartbeats.
  void Start();
  // Joins the receiver (on_broken never runs after this) and fails later passes; the owner
  // calls it before what on_broken touches goes. The destructor stops too.
  void Stop();
  // Sends a pass to stage 1 and waits for the last stage's hidden states (host memory).
  absl::StatusOr<at::Tensor> Carry(const std::vector<int64_t>& layout, const at::Tensor& hidden);
  // The pass that carried the last step failed on the leader after the other stages ran it:
  // tells them to roll it back (their ring KV caches, as the leader's own), before any later
  // step. Nothing once the pipeline is broken.
  void RollBackLastStep();
  // OK while every stage answers.
  absl::Status health() const;
  const StageLink& link() const { return *link_; }
  // Time passes spent waiting for the other stages (send to answer), for the metrics.
  double wait_seconds() const { return wait_ns_.load() * 1e-9; }

 private:
  void Break(const absl::Status& status);
  void ReceiveAnswers();

  std::shared_ptr<StageLink> link_;
  std::function<void(const absl::Status&)> on_broken_;
  std::mutex carry_mutex_;  // one pass in flight
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  absl::Status broken_;     // mutex_
  bool stopping_ = false;   // mutex_
  bool awaiting_ = false;   // mutex_: a step was sent and its answer has not come
  bool has_answer_ = false; // mutex_
  StageMessage answer_;     // mutex_; its hidden states in answer_buffer_
  // The answers' hidden states, out of the link's receive buffer (which the next Receive
  // reuses), pinned when the link's are. Reused: one answer is awaited at a time, and the next
  // lands only after the pass that read this one ended, with a blocking copy of its output to
  // the host, which orders after the non-blocking copy of this answer onto a GPU.
  HopBuffer answer_buffer_;
  int64_t step_ = 0;
  std::atomic<uint64_t> wait_ns_{0};
  std::thread receiver_;
};

// Carries the pass across the other stages after `boundary_block` computed.
class PipelineHook : public BlockHook {
 public:
  PipelineHook(std::shared_ptr<StagePipeline> pipeline, size_t boundary_block)
      : pipeline_(std::move(pipeline)), boundary_block_(boundary_block) {}
  void BeginPass() override { carried_ = false; }
  void Exit(BlockCall& call) override;
  // A pass abandoned after its step went to the other stages rolls the step back there.
  void EndPass(at::Tensor* output) override;

 private:
  std::shared_ptr<StagePipeline> pipeline_;
  size_t boundary_block_;
  bool carried_ = false;  // this pass sent its step (passes run one at a time)
  HopBuffer send_buffer_;  // the boundary's hidden states out of a real GPU (pinned)
};

}  // namespace placer::runtime
