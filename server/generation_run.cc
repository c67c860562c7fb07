#include "server/generation_run.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "model/generation_engine.h"
#include "server/text_generation.h"

namespace placer::server {

absl::StatusOr<GenerationSummary> RunGeneration(const ModelSnapshot& model,
                                                const model::GenerationRequest& request,
                                                const v1::SamplingParams& params,
                                                const GenerationCaller& caller,
                                                const PieceWriter& write) {
  grpc::ServerContext* context = caller.context;
  const RequestGate* gate = caller.gate;
  const std::function<bool()>& also_stop = caller.should_stop;
  const auto stopped = [context, gate, &also_stop] {
    return context->IsCancelled() || gate->cancelled() || (also_stop && also_stop());
  };
  TextStream text(model.tokenizer.get(), {params.stop().begin(), params.stop().end()});
  GenerationSummary summary;
  summary.prompt_tokens = static_cast<uint32_t>(request.prompt.size());
  caller.metrics->Start(request.prompt.size());
  // gRPC gives no deadline as a far-future time point; the engine checks it while queued.
  using Clock = model::GenerationEngine::Clock;
  const auto remaining = context->deadline() - std::chrono::system_clock::now();
  const auto deadline = remaining > std::chrono::hours(24 * 365)
                            ? Clock::time_point::max()
                            : Clock::now() + std::chrono::duration_cast<Clock::duration>(remaining);
  auto finish =
      model.engine->Generate(request, deadline, stopped, [&](const model::SampledToken& token) {
        if (stopped()) return model::TokenVerdict::kCancel;
        TextStream::Delta delta = text.Add(token.id);
        ++summary.completion_tokens;
        caller.metrics->OnToken();
        if (!write(token, delta.text)) return model::TokenVerdict::kCancel;
        return delta.stopped ? model::TokenVerdict::kStop : model::TokenVerdict::kContinue;
      });
  if (!finish.ok()) return finish.status();
  if (*finish == model::FinishReason::kCancelled && gate->cancelled()) {
    return absl::UnavailableError(
        absl::StrCat("placerd is shutting down: the stream was cancelled after --drain-timeout, ",
                     summary.completion_tokens, " token(s) in; retry on another replica"));
  }
  if (*finish == model::FinishReason::kCancelled &&
      (context->IsCancelled() || (also_stop && also_stop()))) {
    return absl::CancelledError("the client cancelled or its deadline passed");
  }
  summary.finish = *finish;
  summary.final_text = text.Finish();
  return summary;
}

}  // namespace placer::server
