// Opens the checkpoint that --model names and describes it for ModelInfo. The one place the
// server touches the loader (and so libtorch headers) until model/ exists to stand between.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model_slot.h"

namespace placer::loader {
class Checkpoint;
}

namespace placer::server {

struct IndexedCheckpoint {
  std::shared_ptr<loader::Checkpoint> checkpoint;
  ModelSnapshot snapshot;  // state kIndexed, with architecture, dtype and parameter count
};

// Reads config.json and every shard header (no tensor data); errors name file and reason.
absl::StatusOr<IndexedCheckpoint> IndexCheckpoint(const std::string& dir);

}  // namespace placer::server
