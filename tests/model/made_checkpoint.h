// A checkpoint written by placer-make-checkpoint (the test tools' writer, not our loader) and
// opened: what the model tests that need a real directory of shards start from.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"

namespace placer::model {

// Runs `placer-make-checkpoint --out dir <writer_args>` (PLACER_MAKE_CHECKPOINT_PATH, quiet)
// and opens the result; an error names the command when the writer fails.
inline absl::StatusOr<std::shared_ptr<const loader::Checkpoint>> MakeAndOpenCheckpoint(
    const std::string& dir, const std::string& writer_args) {
  const std::string command =
      absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir, " ", writer_args, " > /dev/null");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("the checkpoint writer failed: ", command));
  }
  return loader::Checkpoint::Open(dir);
}

}  // namespace placer::model
