// A block is the unit the hooks move: a module that runs whole on one execution device
// (the embedding, one decoder layer, the final norm, the lm_head). The architecture
// description says which tensors each block reads (BlockSpecsFor); the dispatcher hands them
// over on the right device.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "loader/architectures/architecture.h"
#include "loader/quantized_layout.h"

namespace placer::runtime {

struct BlockTensor {
  std::string name;  // checkpoint tensor read, e.g. "model.layers.3.mlp.up_proj.weight"
  // Left out by config.json (a bias with attention_bias false): never read, an undefined
  // tensor in its slot. A tensor not absent must be in the checkpoint.
  bool absent = false;
  // What decides whether --quantize packs the slot (PackedUnder, loader/quantized_slots.h): a
  // decoder layer's linear weight (and how it is stored), or the lm_head's ([out, in]; a tied
  // head's is the embedding table, loader::HoldsLmHead).
  loader::LinearWeight linear = loader::LinearWeight::kNone;
  bool lm_head = false;
};

// Whether `quantize` packs `slot` at load, and the options it packs it with.
bool PackedUnder(const loader::QuantizeOptions& quantize, const BlockTensor& slot);
loader::QuantizeOptions SlotQuantizeOptions(const loader::QuantizeOptions& quantize,
                                            const BlockTensor& slot);

struct BlockSpec {
  std::string module;  // e.g. "model.layers.3"; names the block in errors and figures
  std::vector<BlockTensor> tensors;
  // Reads only a few rows of its weights per pass (an embedding lookup). Offloaded, such a
  // block runs where its weights are (host memory or the mapped files) and only its output
  // rows move on, instead of staging the whole table onto the execution device.
  bool row_lookup = false;
};

// One spec per block of the description, in execution order, with a slot per tensor (a
// tied slot reads the tensor it is tied to).
std::vector<BlockSpec> BlockSpecsFor(const loader::ArchitectureDescription& architecture);

// A block's weights on its execution device, in the order of BlockSpec::tensors.
using BlockWeights = std::vector<at::Tensor>;

}  // namespace placer::runtime
