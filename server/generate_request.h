// Turns a GenerateRequest into the model's GenerationRequest: what the client left unset comes
// from the model's generation defaults; anything out of range is INVALID_ARGUMENT naming the
// field, and text is FAILED_PRECONDITION until placerd can tokenize.
#pragma once

#include "absl/status/statusor.h"
#include "model/generation.h"
#include "placer/v1/placer.pb.h"
#include "server/model_slot.h"

namespace placer::server {

absl::StatusOr<model::GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                                const ModelSnapshot& model);

}  // namespace placer::server
