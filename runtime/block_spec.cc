#include "runtime/block_spec.h"

namespace placer::runtime {

std::vector<BlockSpec> BlockSpecsFor(const loader::ArchitectureDescription& architecture) {
  std::vector<BlockSpec> blocks;
  for (const loader::BlockDescription& block : architecture.blocks) {
    BlockSpec spec{block.module, {}, block.row_lookup};
    for (const loader::TensorDescription& tensor : block.tensors) {
      spec.tensors.push_back({tensor.source(), !tensor.present, tensor.linear});
    }
    blocks.push_back(std::move(spec));
  }
  return blocks;
}

}  // namespace placer::runtime
