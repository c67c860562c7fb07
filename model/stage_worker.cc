#include "model/stage_worker.h"

#include "absl/strings/str_cat.h"
#include "model/forward_runner.h"
#include "model/stage_layout.h"

namespace placer::model {

absl::Status ServeStageSteps(const CausalLm& model, runtime::StageLink& link) {
  const auto* decoder = dynamic_cast<const DecoderOnlyModel*>(&model);
  if (decoder == nullptr) return absl::InternalError("this model cannot run as a pipeline stage");
  const int previous = link.rank() - 1;
  const int next = (link.rank() + 1) % link.size();
  // Passed on unchanged to the next stage (the link sends what it last received).
  link.OnKvBlocksInUse(
      [pool = decoder->kv_pool()](int64_t used) { pool->MirrorBlocksInUse(used); });
  if (decoder->computes_on_cuda()) link.PinReceiveBuffers();
  link.StartHeartbeats(next);
  // The last step's view of the caches, until the next step: the leader may fail it after
  // this stage ran (a later stage, or its own head), and then rolls it back here too.
  DecodedLayout last_step;
  int64_t last_step_id = -1;
  while (true) {
    absl::StatusOr<runtime::StageMessage> message = link.Receive(previous);
    if (!message.ok()) return message.status();
    runtime::StageMessage out;
    out.step = message->step;
    if (message->kind == runtime::StageMessageKind::kRollback) {
      if (message->step == last_step_id) RollbackStageStep(last_step);
      last_step = DecodedLayout();
      last_step_id = -1;
      // Every worker rolls back; the leader, who asked, needs no answer.
      if (next == 0) continue;
      out.kind = runtime::StageMessageKind::kRollback;
    } else if (message->kind == runtime::StageMessageKind::kStepFailed) {
      out.kind = runtime::StageMessageKind::kStepFailed;
      out.error = message->error;
    } else {
      last_step = DecodedLayout();
      last_step_id = message->step;
      absl::StatusOr<at::Tensor> hidden =
          decoder->RunStage(message->layout, message->hidden, &last_step);
      if (hidden.ok()) {
        out.hidden = *std::move(hidden);
        if (next != 0) out.layout = std::move(message->layout);
      } else {
        out.kind = runtime::StageMessageKind::kStepFailed;
        out.error = absl::StrCat(runtime::StageLink::StageName(link.rank(), link.size()), ": ",
                                 hidden.status().message());
      }
    }
    if (absl::Status sent = link.Send(next, out); !sent.ok()) return sent;
  }
}

absl::Status PrepareLeaderLink(const CausalLm& model, runtime::StageLink& link) {
  const auto* decoder = dynamic_cast<const DecoderOnlyModel*>(&model);
  if (decoder == nullptr) return absl::InternalError("this model cannot lead a pipeline");
  link.SetKvBlocksInUseSource([pool = decoder->kv_pool()] { return pool->blocks_in_use(); });
  if (decoder->computes_on_cuda()) link.PinReceiveBuffers();
  return absl::OkStatus();
}

}  // namespace placer::model
