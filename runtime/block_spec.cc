#include "runtime/block_spec.h"

#include "loader/quantized_slots.h"

namespace placer::runtime {

bool PackedUnder(const loader::QuantizeOptions& quantize, const BlockTensor& slot) {
  return loader::SlotQuantization(slot.linear, slot.lm_head, quantize).has_value();
}

loader::QuantizeOptions SlotQuantizeOptions(const loader::QuantizeOptions& quantize,
                                            const BlockTensor& slot) {
  return loader::SlotQuantization(slot.linear, slot.lm_head, quantize).value_or(quantize);
}

std::vector<BlockSpec> BlockSpecsFor(const loader::ArchitectureDescription& architecture) {
  std::vector<BlockSpec> blocks;
  for (const loader::BlockDescription& block : architecture.blocks) {
    BlockSpec spec{block.module, {}, block.row_lookup};
    for (const loader::TensorDescription& tensor : block.tensors) {
      // A tied head reads the embedding's tensor: both slots are the head's (HoldsLmHead), so
      // both read one table, packed or not.
      spec.tensors.push_back({tensor.source(), !tensor.present, tensor.linear,
                              loader::HoldsLmHead(tensor)});
    }
    blocks.push_back(std::move(spec));
  }
  return blocks;
}

}  // namespace placer::runtime
