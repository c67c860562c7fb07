#include "model/stage_worker.h"

#include "absl/strings/str_cat.h"
#include "model/forward_runner.h"

namespace placer::model {

absl::Status ServeStageSteps(const CausalLm& model, runtime::StageLink& link) {
  const auto* decoder = dynamic_cast<const DecoderOnlyModel*>(&model);
  if (decoder == nullptr) return absl::InternalError("this model cannot run as a pipeline stage");
  const int previous = link.rank() - 1;
  const int next = (link.rank() + 1) % link.size();
  link.StartHeartbeats(next);
  while (true) {
    absl::StatusOr<runtime::StageMessage> message = link.Receive(previous);
    if (!message.ok()) return message.status();
    runtime::StageMessage out;
    out.step = message->step;
    if (message->kind == runtime::StageMessageKind::kStepFailed) {
      out.kind = runtime::StageMessageKind::kStepFailed;
      out.error = message->error;
    } else {
      absl::StatusOr<at::Tensor> hidden = decoder->RunStage(message->layout, message->hidden);
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

}  // namespace placer::model
