// Prefetch for blocks that run from the mapped files (disk, no GPU to stage onto): while a
// block computes, the kernel is advised to read in the pages of the next disk block
// (madvise WILLNEED), as staging runs ahead for a GPU.
#pragma once

#include <vector>

#include "runtime/block_hook.h"

namespace placer::runtime {

class DiskReadaheadHook final : public BlockHook {
 public:
  // `blocks` must outlive the hook.
  explicit DiskReadaheadHook(const std::vector<BoundBlock>& blocks) : blocks_(blocks) {}

  void Enter(BlockCall& call) override;

 private:
  const std::vector<BoundBlock>& blocks_;
};

// Whether a block runs from the mapped files in place (on disk and not staged).
bool RunsFromDisk(const BoundBlock& block);

}  // namespace placer::runtime
