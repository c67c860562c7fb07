// One generation through the model's engine, as every protocol serves it (placer.v1's
// Generate, the Open Inference Protocol's ModelInfer and ModelStreamInfer): the engine's
// deadline from the client's, a stop when the client leaves, the drain runs out or the caller
// says so, UTF-8-safe text deltas that end at stop strings (TextStream), token metrics, and
// the status a stream stopped early ends with. The protocols differ only in what they write.
#pragma once

#include <grpcpp/server_context.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "model/generation.h"
#include "placer/v1/placer.pb.h"
#include "server/model_slot.h"
#include "server/request_gate.h"
#include "server/sequence_metrics.h"

namespace placer::server {

struct GenerationCaller {
  grpc::ServerContext* context = nullptr;
  const RequestGate* gate = nullptr;
  SequenceMetrics* metrics = nullptr;
  // Also stops the generation when true (a stream whose writes fail); may be empty. Runs on
  // the engine thread as well: thread-safe and cheap.
  std::function<bool()> should_stop;
};

struct GenerationSummary {
  model::FinishReason finish = model::FinishReason::kLength;
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  std::string final_text;  // text held back until the end (an incomplete UTF-8 sequence, ...)
};

// Called for each generated token with its text delta (possibly empty); false when the
// client can no longer be written to, which cancels the generation.
using PieceWriter = std::function<bool(const model::SampledToken& token, const std::string& text)>;

// Runs `request` (built by BuildGenerationRequest; `stop_strings` from the same params). A
// generation cut short by the client is CANCELLED, by the drain UNAVAILABLE saying so; engine
// errors come back as they are (RESOURCE_EXHAUSTED when the queue is full, ...).
absl::StatusOr<GenerationSummary> RunGeneration(const ModelSnapshot& model,
                                                const model::GenerationRequest& request,
                                                const v1::SamplingParams& params,
                                                const GenerationCaller& caller,
                                                const PieceWriter& write);

}  // namespace placer::server
