#include "runtime/block_spec.h"

#include "loader/quantized_slots.h"

namespace placer::runtime {

bool PackedUnder(const loader::QuantizeOptions& quantize, const BlockTensor& slot) {
  if (!quantize.enabled() || slot.linear == loader::LinearWeight::kNone) return false;
  return !slot.lm_head || quantize.quantizes_lm_head();
}

loader::QuantizeOptions SlotQuantizeOptions(const loader::QuantizeOptions& quantize,
                                            const BlockTensor& slot) {
  return slot.lm_head ? quantize.LmHead() : quantize;
}

std::vector<BlockSpec> BlockSpecsFor(const loader::ArchitectureDescription& architecture) {
  std::vector<BlockSpec> blocks;
  for (const loader::BlockDescription& block : architecture.blocks) {
    BlockSpec spec{block.module, {}, block.row_lookup};
    for (const loader::TensorDescription& tensor : block.tensors) {
      // A tied head reads the embedding's tensor, which the lookup needs as it is: never
      // packed (loader::CheckQuantizableLmHead refuses to be asked).
      const bool packable_head = tensor.lm_head && tensor.tied_to.empty();
      spec.tensors.push_back({tensor.source(), !tensor.present,
                              packable_head ? loader::PackedOrientation(tensor) : tensor.linear,
                              packable_head});
    }
    blocks.push_back(std::move(spec));
  }
  return blocks;
}

}  // namespace placer::runtime
