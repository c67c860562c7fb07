#include "runtime/block_dispatcher.h"

#include <c10/util/Exception.h>
#include <c10/util/strides.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/offload_store.h"
#include "runtime/staging_stream.h"

namespace placer::runtime {
namespace {

uint64_t Bytes(const at::Tensor& tensor) {
  return static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
}

// Where each staged tensor starts inside a slot: aligned for vector loads and CUDA kernels.
constexpr uint64_t kSlotAlignment = 256;
uint64_t SlotSpan(const at::Tensor& tensor) {
  return (Bytes(tensor) + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}

// Double buffering: the slot holding the block that computes, and one being filled.
constexpr size_t kStagingSlots = 2;

bool StoredAs(const loader::Checkpoint& checkpoint, const std::string& name,
              at::ScalarType dtype) {
  const loader::TensorInfo* info = checkpoint.Find(name);
  if (info == nullptr) return false;
  auto stored = loader::ToScalarType(info->dtype);
  return stored.ok() && *stored == dtype;
}

// Reads each (tensor, device) once, so tied weights (GPT-2's wte and lm_head) are held once.
class WeightReader {
 public:
  WeightReader(std::shared_ptr<const loader::Checkpoint> checkpoint, at::ScalarType dtype,
               bool virtual_gpus, bool pin_host, RuntimeAccounting* accounting)
      : checkpoint_(std::move(checkpoint)),
        dtype_(dtype),
        virtual_gpus_(virtual_gpus),
        pin_host_(pin_host),
        accounting_(accounting) {}

  void set_offload_store(std::shared_ptr<loader::OffloadStore> store) { store_ = std::move(store); }

  absl::StatusOr<at::Tensor> Read(const std::string& name, const Device& device) {
    const auto key = std::make_pair(name, device.Name());
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    absl::StatusOr<at::Tensor> tensor = ReadUncached(name, device);
    if (!tensor.ok()) return tensor.status();
    accounting_->AddMemory(device.Name(), MemoryKind::kWeights,
                           static_cast<int64_t>(Bytes(*tensor)));
    cache_.emplace(key, *tensor);
    return tensor;
  }

 private:
  absl::StatusOr<at::Tensor> ReadUncached(const std::string& name, const Device& device) {
    if (device.kind == DeviceKind::kDisk) {
      // Left in the mapped files: the checkpoint's own when the dtype matches, else the
      // converted copy in the offload store.
      if (store_ != nullptr && store_->converted().count(name) > 0) return store_->Read(name);
      return checkpoint_->ReadTensor(name, dtype_, at::Device(at::kCPU));
    }
    const at::Device target = TorchDeviceOf(device, virtual_gpus_);
    absl::StatusOr<at::Tensor> tensor = checkpoint_->ReadTensor(name, dtype_, target);
    if (!tensor.ok()) return tensor;
    if (device.is_gpu() && virtual_gpus_) {
      // A virtual GPU holds its own copy, as a real one would, not the file's pages.
      return tensor->clone(at::MemoryFormat::Contiguous);
    }
    if (device.kind == DeviceKind::kCpu && pin_host_) {
      // Pinned host memory lets staging copies to the GPU run without blocking.
      at::Tensor pinned = at::empty(tensor->sizes(), tensor->options().pinned_memory(true));
      pinned.copy_(*tensor);
      return pinned;
    }
    return tensor;
  }

  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  at::ScalarType dtype_;
  bool virtual_gpus_;
  bool pin_host_;
  RuntimeAccounting* accounting_;
  std::shared_ptr<loader::OffloadStore> store_;
  std::map<std::pair<std::string, std::string>, at::Tensor> cache_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BlockDispatcher>> BlockDispatcher::Create(
    std::shared_ptr<const loader::Checkpoint> checkpoint, std::vector<BlockSpec> blocks,
    const RuntimePlan& plan, at::ScalarType dtype,
    std::shared_ptr<RuntimeAccounting> accounting) {
  std::unique_ptr<BlockDispatcher> dispatcher(
      new BlockDispatcher(plan.virtual_gpus, std::move(accounting)));
  dispatcher->prefetch_ = plan.prefetch;
  const bool gpu_execution = plan.execution_device.is_gpu();
  std::vector<std::string> converted_on_disk;

  for (BlockSpec& spec : blocks) {
    BoundBlock bound;
    bool first = true;
    std::string first_tensor;
    for (const BlockTensor& tensor : spec.tensors) {
      if (tensor.absent) continue;
      if (checkpoint->Find(tensor.name) == nullptr) {
        return absl::NotFoundError(absl::StrCat(checkpoint->dir(), ": block ", spec.module,
                                                " needs tensor ", tensor.name,
                                                ", which the checkpoint does not have"));
      }
      absl::StatusOr<Device> device = plan.DeviceOf(tensor.name);
      if (!device.ok()) return device.status();
      if (first) {
        bound.weights_device = *device;
        first_tensor = tensor.name;
        first = false;
      } else if (*device != bound.weights_device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device map: block ", spec.module, " is split between ",
            bound.weights_device.Name(), " (", first_tensor, ") and ", device->Name(), " (",
            tensor.name, "); a block must stay on one device"));
      }
      if (device->kind == DeviceKind::kDisk && !StoredAs(*checkpoint, tensor.name, dtype)) {
        converted_on_disk.push_back(tensor.name);
      }
    }
    if (first) {
      return absl::InvalidArgumentError(
          absl::StrCat("block ", spec.module, " has none of its tensors in the checkpoint"));
    }
    // An offloaded embedding is looked up in host memory: a few rows move on, not the table.
    bound.staged = bound.weights_device.is_offload() && gpu_execution && !spec.row_lookup;
    bound.execution_device = bound.weights_device.is_gpu() ? bound.weights_device
                             : bound.staged                ? plan.execution_device
                                                           : Device::Cpu();
    bound.spec = std::move(spec);
    dispatcher->blocks_.push_back(std::move(bound));
  }

  WeightReader reader(checkpoint, dtype, plan.virtual_gpus,
                      /*pin_host=*/gpu_execution && !plan.virtual_gpus,
                      dispatcher->accounting_.get());
  if (!converted_on_disk.empty()) {
    if (plan.offload_dir.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", converted_on_disk.front(),
          " goes to disk in a dtype other than the one stored, which needs --offload-dir"));
    }
    auto store = loader::OffloadStore::Open(checkpoint, plan.offload_dir, converted_on_disk, dtype);
    if (!store.ok()) return store.status();
    reader.set_offload_store(*std::move(store));
  }
  try {
    for (BoundBlock& block : dispatcher->blocks_) {
      for (const BlockTensor& tensor : block.spec.tensors) {
        if (tensor.absent) {
          block.weights.emplace_back();
          continue;
        }
        absl::StatusOr<at::Tensor> read = reader.Read(tensor.name, block.weights_device);
        if (!read.ok()) return read.status();
        block.weights.push_back(*std::move(read));
      }
    }
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("binding weights failed: ", e.what_without_backtrace()));
  }

  bool any_staged = false;
  for (const BoundBlock& block : dispatcher->blocks_) any_staged |= block.staged;
  if (any_staged) {
    try {
      dispatcher->AllocateStagingSlots(plan.execution_device);
    } catch (const c10::Error& e) {
      return absl::ResourceExhaustedError(absl::StrCat("allocating the staging slots on ",
                                                       plan.execution_device.Name(), " failed: ",
                                                       e.what_without_backtrace()));
    }
    BlockDispatcher* self = dispatcher.get();
    const at::Device staging_device = TorchDeviceOf(plan.execution_device, plan.virtual_gpus);
    WeightStager::Sequence sequence{
        [self](size_t block) { return self->SlotBytes(block); },
        [self](size_t block) { return self->NextStaged(block); },
        // The kernels of the slot's blocks are queued by now: copies into it wait for them.
        [self, staging_device](size_t slot) { self->slot_fences_[slot].Record(staging_device); }};
    dispatcher->stager_ = std::make_unique<WeightStager>(
        kStagingSlots, dispatcher->staging_slot_bytes_, std::move(sequence),
        [self](size_t block, StagingRegion region, bool background) {
          return self->Stage(block, region, background);
        },
        self->accounting_.get(), plan.execution_device.Name());
  }
  return dispatcher;
}

BlockDispatcher::~BlockDispatcher() { stager_.reset(); }

at::Device BlockDispatcher::torch_device(size_t block) const {
  return TorchDeviceOf(blocks_[block].execution_device, transfer_.virtual_gpus());
}

uint64_t BlockDispatcher::SlotBytes(size_t block) const {
  uint64_t bytes = 0;
  for (const at::Tensor& tensor : blocks_[block].weights) {
    if (tensor.defined()) bytes += SlotSpan(tensor);
  }
  return bytes;
}

void BlockDispatcher::AllocateStagingSlots(const Device& execution_device) {
  uint64_t largest = 0;
  for (size_t block = 0; block < blocks_.size(); ++block) {
    if (blocks_[block].staged) largest = std::max(largest, SlotBytes(block));
  }
  staging_slot_bytes_ = largest;
  const at::Device device = TorchDeviceOf(execution_device, transfer_.virtual_gpus());
  for (size_t slot = 0; slot < kStagingSlots; ++slot) {
    // Not touched here: host pages fault in once, on the first pass, and stay.
    staging_slots_.push_back(at::empty({static_cast<int64_t>(largest)},
                                       at::TensorOptions().dtype(at::kByte).device(device)));
    slot_fences_.emplace_back();
  }
}

BlockWeights BlockDispatcher::Stage(size_t block, StagingRegion region, bool background) const {
  const BoundBlock& bound = blocks_[block];
  const at::Device target = torch_device(block);
  const at::Tensor& buffer = staging_slots_.at(region.slot);
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

void BlockDispatcher::ReadAhead(size_t block) const {
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const at::Tensor& tensor : blocks_[block].weights) {
    if (!tensor.defined() || tensor.numel() == 0) continue;
    const auto start = reinterpret_cast<uintptr_t>(tensor.data_ptr());
    const uintptr_t aligned = start & ~(kPage - 1);
    // Advice only: the kernel reads the pages in while the current block computes.
    madvise(reinterpret_cast<void*>(aligned), start + Bytes(tensor) - aligned, MADV_WILLNEED);
  }
}

size_t BlockDispatcher::NextStaged(size_t block) const {
  for (size_t step = 1; step <= blocks_.size(); ++step) {
    const size_t next = (block + step) % blocks_.size();
    if (blocks_[next].staged) return next;
  }
  return block;
}

size_t BlockDispatcher::NextOnDisk(size_t block) const {
  for (size_t step = 1; step <= blocks_.size(); ++step) {
    const size_t next = (block + step) % blocks_.size();
    if (blocks_[next].weights_device.kind == DeviceKind::kDisk) return next;
  }
  return block;
}

BlockDispatcher::Pass::Pass(BlockDispatcher& dispatcher)
    : dispatcher_(dispatcher), lock_(dispatcher.pass_mutex_) {}

BlockDispatcher::Pass::~Pass() { ReleaseStaged(); }

void BlockDispatcher::Pass::ReleaseStaged() {
  if (staged_weights_ == nullptr) return;
  staged_weights_.reset();
  dispatcher_.stager_->Release(staged_block_);
}

const BlockWeights& BlockDispatcher::Pass::Enter(size_t block,
                                                 std::initializer_list<at::Tensor*> activations,
                                                 Device* current) {
  ReleaseStaged();
  const BoundBlock& bound = dispatcher_.blocks_[block];
  for (at::Tensor* activation : activations) {
    *activation = dispatcher_.transfer_.Move(*activation, *current, bound.execution_device);
  }
  *current = bound.execution_device;
  if (!bound.staged) {
    if (dispatcher_.prefetch_ && bound.weights_device.kind == DeviceKind::kDisk) {
      dispatcher_.ReadAhead(dispatcher_.NextOnDisk(block));
    }
    return bound.weights;
  }
  double waited = 0;
  staged_weights_ = dispatcher_.stager_->Acquire(block, &waited);
  staged_block_ = block;
  dispatcher_.accounting_->AddOffloadWait(waited);
  if (dispatcher_.prefetch_) dispatcher_.stager_->Prefetch(dispatcher_.NextStaged(block));
  return *staged_weights_;
}

}  // namespace placer::runtime
