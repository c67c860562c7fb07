#include "server/checkpoint_index.h"

#include "loader/checkpoint.h"

namespace placer::server {

absl::StatusOr<IndexedCheckpoint> IndexCheckpoint(const std::string& dir) {
  auto opened = loader::Checkpoint::Open(dir);
  if (!opened.ok()) return opened.status();
  IndexedCheckpoint indexed;
  indexed.checkpoint = *opened;
  const loader::Checkpoint& checkpoint = *indexed.checkpoint;
  indexed.snapshot.state = ModelState::kIndexed;
  indexed.snapshot.path = dir;
  indexed.snapshot.architecture =
      std::string(loader::ArchitectureName(checkpoint.config().architecture));
  indexed.snapshot.dtype = std::string(loader::DTypeName(checkpoint.dtype()));
  indexed.snapshot.parameter_count = static_cast<uint64_t>(checkpoint.parameter_count());
  return indexed;
}

}  // namespace placer::server
