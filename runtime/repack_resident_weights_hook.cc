#include "runtime/repack_resident_weights_hook.h"

#include <map>

#include "loader/mapped_file.h"

namespace placer::runtime {
namespace {

const void* StorageOf(const at::Tensor& tensor) { return tensor.storage().data(); }

}  // namespace

bool RepackResidentWeightsHook::Applies(const BoundBlock& block) {
  return block.weights_device.kind == DeviceKind::kCpu &&
         block.execution_device.kind == DeviceKind::kCpu && !block.staged && !block.other_stage;
}

RepackResidentWeightsHook::RepackResidentWeightsHook(std::vector<BoundBlock>& blocks,
                                                     WeightRepacker repacker)
    : blocks_(blocks), repacker_(std::move(repacker)), done_(blocks.size(), false) {
  std::map<const void*, int> holders;
  for (const BoundBlock& block : blocks_) {
    for (const at::Tensor& weight : block.weights) {
      if (weight.defined()) ++holders[StorageOf(weight)];
    }
  }
  for (const auto& [storage, count] : holders) {
    if (count > 1) shared_.insert(storage);
  }
}

void RepackResidentWeightsHook::Enter(BlockCall& call) {
  if (done_[call.block]) return;
  done_[call.block] = true;
  BoundBlock& block = blocks_[call.block];
  if (!Applies(block)) return;
  for (size_t slot = 0; slot < block.weights.size(); ++slot) {
    at::Tensor& weight = block.weights[slot];
    if (!weight.defined() || shared_.count(StorageOf(weight)) != 0) continue;
    at::Tensor repacked = repacker_(block.spec.tensors[slot], weight);
    if (!repacked.defined()) continue;
    const void* bytes = weight.data_ptr();
    const auto size = static_cast<std::uint64_t>(weight.nbytes());
    weight = std::move(repacked);
    loader::MappedFile::DropResidentPages(bytes, size);
  }
}

}  // namespace placer::runtime
