// Opens the checkpoint that --model names and binds it to its architecture. The one place the
// server reaches into loader/ and model/ construction; everything after uses CausalLm.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "server/model_slot.h"

namespace placer::server {

// A snapshot in state kReady, or an error naming the file, tensor or field at fault.
absl::StatusOr<ModelSnapshot> LoadServedModel(const std::string& dir);

}  // namespace placer::server
