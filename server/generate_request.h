// Turns a GenerateRequest into the model's GenerationRequest: what the client left unset comes
// from the model's generation defaults; text goes through the model's tokenizer
// (text_generation.h). The ranges are checked once, by the engine (ValidateGenerationRequest).
#pragma once

#include "absl/status/statusor.h"
#include "model/generation.h"
#include "placer/v1/placer.pb.h"
#include "server/model_slot.h"
#include "server/text_generation.h"

namespace placer::server {

absl::StatusOr<model::GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                                const ModelSnapshot& model,
                                                                const TextLimits& limits);

}  // namespace placer::server
