#include "runtime/stage_weights_hook.h"

#include <c10/util/Exception.h>
#include <c10/util/strides.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace placer::runtime {
namespace {


// Where each staged tensor starts inside a slot: aligned for vector loads and CUDA kernels.
constexpr uint64_t kSlotAlignment = 256;
uint64_t SlotSpan(const at::Tensor& tensor) {
  const uint64_t bytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
  return (bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StageWeightsHook>> StageWeightsHook::Create(
    const std::vector<BoundBlock>& blocks, const DeviceTransfer& transfer,
    RuntimeAccounting* accounting, const Device& execution_device, bool prefetch,
    int staging_slots) {
  if (std::none_of(blocks.begin(), blocks.end(), [](const BoundBlock& b) { return b.staged; })) {
    return nullptr;
  }
  std::unique_ptr<StageWeightsHook> hook(
      new StageWeightsHook(blocks, transfer, accounting, prefetch));
  for (size_t block = 0; block < blocks.size(); ++block) {
    if (blocks[block].staged) hook->slot_bytes_ = std::max(hook->slot_bytes_, hook->SlotBytes(block));
  }
  const at::Device device = TorchDeviceOf(execution_device, transfer.virtual_gpus());
  try {
    for (int slot = 0; slot < staging_slots; ++slot) {
      // Not touched here: host pages fault in once, on the first pass, and stay.
      hook->slots_.push_back(at::empty({static_cast<int64_t>(hook->slot_bytes_)},
                                       at::TensorOptions().dtype(at::kByte).device(device)));
      hook->slot_fences_.emplace_back();
    }
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("allocating the staging slots on ",
                                                     execution_device.Name(), " failed: ",
                                                     e.what_without_backtrace()));
  }
  StageWeightsHook* self = hook.get();
  WeightStager::Sequence sequence{
      [self](size_t block) { return self->SlotBytes(block); },
      [self](size_t block) { return self->NextStaged(block); },
      // The kernels of the slot's blocks are queued by now: copies into it wait for them.
      [self, device](size_t slot) { self->slot_fences_[slot].Record(device); }};
  hook->stager_ = std::make_unique<WeightStager>(
      static_cast<size_t>(staging_slots), hook->slot_bytes_, std::move(sequence),
      [self](size_t block, StagingRegion region, bool background) {
        return self->Stage(block, region, background);
      },
      accounting, execution_device.Name());
  return hook;
}

StageWeightsHook::~StageWeightsHook() {
  held_.reset();
  stager_.reset();  // joins the thread before the slots it copies into go
}

void StageWeightsHook::Enter(BlockCall& call) {
  if (!call.bound->staged) return;
  double waited = 0;
  held_ = stager_->Acquire(call.block, &waited);
  held_block_ = call.block;
  accounting_->AddOffloadWait(waited);
  call.weights = held_.get();
  if (prefetch_) stager_->Prefetch(NextStaged(call.block));
}

void StageWeightsHook::Exit(BlockCall& call) {
  if (call.bound->staged) Release();
}

void StageWeightsHook::EndPass(at::Tensor* /*output*/) { Release(); }

void StageWeightsHook::Release() {
  if (held_ == nullptr) return;
  held_.reset();
  stager_->Release(held_block_);
}

uint64_t StageWeightsHook::SlotBytes(size_t block) const {
  uint64_t bytes = 0;
  for (const at::Tensor& tensor : blocks_[block].weights) {
    if (tensor.defined()) bytes += SlotSpan(tensor);
  }
  return bytes;
}

size_t StageWeightsHook::NextStaged(size_t block) const {
  for (size_t step = 1; step <= blocks_.size(); ++step) {
    const size_t next = (block + step) % blocks_.size();
    if (blocks_[next].staged) return next;
  }
  return block;
}

BlockWeights StageWeightsHook::Stage(size_t block, StagingRegion region, bool background) const {
  const BoundBlock& bound = blocks_[block];
  const at::Device target = TorchDeviceOf(bound.execution_device, transfer_.virtual_gpus());
  const at::Tensor& buffer = slots_.at(region.slot);
  StagingStreamScope stream(target);
  // The slot's bytes were last read by the blocks it held before it was last emptied: their
  // kernels must be done before the bytes are overwritten (a no-op on the CPU, where they
  // are). The fence is recorded only while the slot holds nothing, so never during this copy.
  slot_fences_[region.slot].WaitOnCurrentStream(target);
  BlockWeights staged;
  staged.reserve(bound.weights.size());
  uint64_t offset = region.offset;
  for (const at::Tensor& source : bound.weights) {
    if (!source.defined()) {
      staged.emplace_back();
      continue;
    }
    // A contiguous view of the slot's bytes, typed like the source.
    at::Tensor destination = at::empty({0}, buffer.options().dtype(source.scalar_type()));
    destination.set_(buffer.storage(), static_cast<int64_t>(offset) / source.element_size(),
                     source.sizes(), c10::contiguous_strides(source.sizes()));
    transfer_.CopyInto(destination, source, bound.weights_device, bound.execution_device,
                       background);
    staged.push_back(std::move(destination));
    offset += SlotSpan(source);
  }
  stream.WaitForCopies();
  return staged;
}

}  // namespace placer::runtime
