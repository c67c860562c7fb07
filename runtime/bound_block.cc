#include "runtime/bound_block.h"

#include <algorithm>

#include <c10/util/Exception.h>

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/offload_store.h"
#include "base/status_macros.h"

namespace placer::runtime {
namespace {

uint64_t Bytes(const at::Tensor& tensor) {
  return static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
}

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
    PLACER_ASSIGN_OR_RETURN(at::Tensor tensor, ReadUncached(name, device));
    accounting_->AddMemory(device.Name(), MemoryKind::kWeights,
                           static_cast<int64_t>(Bytes(tensor)));
    cache_.emplace(key, tensor);
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

absl::StatusOr<std::vector<BoundBlock>> BindBlocks(
    const std::shared_ptr<const loader::Checkpoint>& checkpoint, std::vector<BlockSpec> blocks,
    const RuntimePlan& plan, at::ScalarType dtype, RuntimeAccounting* accounting) {
  const bool gpu_execution = plan.execution_device.is_gpu();
  std::vector<std::string> converted_on_disk;
  std::vector<BoundBlock> bound_blocks;
  for (BlockSpec& spec : blocks) {
    BoundBlock bound;
    if (std::find(plan.other_stage_blocks.begin(), plan.other_stage_blocks.end(), spec.module) !=
        plan.other_stage_blocks.end()) {
      bound.other_stage = true;
      bound.weights_device = bound.execution_device = Device::Cpu();
      bound.spec = std::move(spec);
      bound_blocks.push_back(std::move(bound));
      continue;
    }
    bool first = true;
    std::string first_tensor;
    for (const BlockTensor& tensor : spec.tensors) {
      if (tensor.absent) continue;
      if (checkpoint->Find(tensor.name) == nullptr) {
        return absl::NotFoundError(absl::StrCat(checkpoint->dir(), ": block ", spec.module,
                                                " needs tensor ", tensor.name,
                                                ", which the checkpoint does not have"));
      }
      PLACER_ASSIGN_OR_RETURN(Device device, plan.DeviceOf(tensor.name));
      if (first) {
        bound.weights_device = device;
        first_tensor = tensor.name;
        first = false;
      } else if (device != bound.weights_device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device map: block ", spec.module, " is split between ",
            bound.weights_device.Name(), " (", first_tensor, ") and ", device.Name(), " (",
            tensor.name, "); a block must stay on one device"));
      }
      if (device.kind == DeviceKind::kDisk && !StoredAs(*checkpoint, tensor.name, dtype)) {
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
    bound_blocks.push_back(std::move(bound));
  }

  WeightReader reader(checkpoint, dtype, plan.virtual_gpus,
                      /*pin_host=*/gpu_execution && !plan.virtual_gpus,
                      accounting);
  if (!converted_on_disk.empty()) {
    if (plan.offload_dir.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", converted_on_disk.front(),
          " goes to disk in a dtype other than the one stored, which needs --offload-dir"));
    }
    PLACER_ASSIGN_OR_RETURN(auto store, loader::OffloadStore::Open(checkpoint, plan.offload_dir,
                                                                   converted_on_disk, dtype));
    reader.set_offload_store(std::move(store));
  }
  try {
    for (BoundBlock& block : bound_blocks) {
      if (block.other_stage) continue;
      for (const BlockTensor& tensor : block.spec.tensors) {
        if (tensor.absent) {
          block.weights.emplace_back();
          continue;
        }
        PLACER_ASSIGN_OR_RETURN(at::Tensor read, reader.Read(tensor.name, block.weights_device));
        block.weights.push_back(std::move(read));
      }
    }
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("binding weights failed: ", e.what_without_backtrace()));
  }

  return bound_blocks;
}

}  // namespace placer::runtime
