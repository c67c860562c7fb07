// Gives the weights of blocks held and run in host memory the layout the CPU's kernels read
// fastest (BF16 linears in AMX tile order: model/bf16_tiles.h), on each block's first call
// rather than at load, so that a checkpoint bound zero-copy is still SERVING without reading a
// byte and with nothing resident (bench/analysis.md, "AMX tiles for BF16 rows").
//
// Only weights no other slot shares are re-laid out (a tied lm_head stays the embedding table
// it is, for the lookups); blocks on disk (run from the mapped files, to keep them out of
// memory), staged blocks (copied for each call) and blocks on GPUs keep theirs. The repacked
// weight replaces the bound one for good: the old one is freed, or, when it views a
// checkpoint's mapping, its pages leave the resident set (loader::MappedFile), so the block
// holds its weights once. Passes run one at a time (BlockRunner), so no call sees a block
// half repacked.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <set>
#include <vector>

#include "runtime/block_hook.h"

namespace placer::runtime {

// The weight in its new layout, or an undefined tensor to keep it as it is.
using WeightRepacker = std::function<at::Tensor(const BlockTensor& slot, const at::Tensor& weight)>;

class RepackResidentWeightsHook final : public BlockHook {
 public:
  // `blocks` must outlive the hook; the hook rewrites their weights.
  RepackResidentWeightsHook(std::vector<BoundBlock>& blocks, WeightRepacker repacker);

  void Enter(BlockCall& call) override;

  // Whether the hook would repack `block`'s weights (held and run in host memory).
  static bool Applies(const BoundBlock& block);

 private:
  std::vector<BoundBlock>& blocks_;
  WeightRepacker repacker_;
  std::vector<bool> done_;
  std::set<const void*> shared_;  // storages held by more than one slot
};

}  // namespace placer::runtime
