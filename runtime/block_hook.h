// Accelerate's ModelHook for placer's blocks: one small class per concern (align devices,
// stage offloaded weights, time compute, and later send to the next pipeline stage or unpack a
// quantized block), chained by BlockRunner. A hook only moves or counts things; the model's
// arithmetic never sees it.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <vector>

#include "runtime/bound_block.h"

namespace placer::runtime {

// One block's call as the hooks see it.
struct BlockCall {
  size_t block = 0;            // index in execution order
  const BoundBlock* bound = nullptr;
  // Enter: the block's inputs; Exit: its outputs. A hook may replace a tensor (move it).
  std::vector<at::Tensor*> activations;
  // The weights the block computes with: its bound weights unless a hook (staging) set others.
  // Valid until the block's Exit.
  const BlockWeights* weights = nullptr;
  // The pass's rows as the model describes them (BlockRunner::Pass::SetLayout), opaque here:
  // what a hook that carries the activations to another pipeline stage sends along.
  const std::vector<int64_t>* layout = nullptr;
};

class BlockHook {
 public:
  virtual ~BlockHook() = default;
  // A forward pass starts; inputs arrive in host memory.
  virtual void BeginPass() {}
  // Before the block computes, in chain order.
  virtual void Enter(BlockCall& /*call*/) {}
  // After it computed, in reverse chain order.
  virtual void Exit(BlockCall& /*call*/) {}
  // The pass ends: `output` is the last block's result, which must leave the pass in host
  // memory; null when a block threw and the pass is abandoned (release what is held). A null
  // EndPass may also follow one with the output, before the next BeginPass: the caller
  // failed the step after all (BlockRunner::Pass::Abandon), or a later hook's EndPass threw.
  virtual void EndPass(at::Tensor* /*output*/) {}
};

}  // namespace placer::runtime
