// A block is the unit the hooks move: a module that runs whole on one execution device
// (the embedding, one decoder layer, the final norm, the lm_head). The architecture says
// which tensors each block reads; the dispatcher hands them over on the right device.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace placer::placement {

struct BlockTensor {
  std::string name;  // full checkpoint name, e.g. "model.layers.3.mlp.up_proj.weight"
  bool optional = false;  // absent from the checkpoint: an undefined tensor in its slot
};

struct BlockSpec {
  std::string module;  // e.g. "model.layers.3"; names the block in errors and figures
  std::vector<BlockTensor> tensors;
  // Reads only a few rows of its weights per pass (an embedding lookup). Offloaded, such a
  // block runs where its weights are (host memory or the mapped files) and only its output
  // rows move on, instead of staging the whole table onto the execution device.
  bool row_lookup = false;
};

// A block's weights on its execution device, in the order of BlockSpec::tensors.
using BlockWeights = std::vector<at::Tensor>;

}  // namespace placer::placement
