#include "runtime/bound_block.h"

#include <algorithm>

#include <c10/util/Exception.h>

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/huge_page_tensor.h"
#include "loader/offload_store.h"
#include "loader/prequantized_repack.h"
#include "loader/quantized_weight.h"
#include "placement/device_roles.h"
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

// The layout --quantize gives a linear weight slot (transposed when stored [in, out]).
absl::StatusOr<loader::PackedLayout> PackedLayoutOfSlot(const loader::Checkpoint& checkpoint,
                                                       const BlockTensor& slot,
                                                       const loader::QuantizeOptions& quantize) {
  if (const loader::QuantizedLinearSource* source = checkpoint.QuantizedLinear(slot.name)) {
    return source->layout;
  }
  const loader::TensorInfo* info = checkpoint.Find(slot.name);
  if (info == nullptr || info->shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--quantize: tensor ", slot.name, " is not a 2-D weight"));
  }
  const bool in_out = slot.linear == loader::LinearWeight::kInOut;
  return loader::PackedLayoutFor(SlotQuantizeOptions(quantize, slot), info->shape[in_out ? 1 : 0],
                                 info->shape[in_out ? 0 : 1], slot.name);
}

// Packed in host memory: a pre-quantized checkpoint's parts repacked, or the stored weight (a
// view of the mapping) quantized under --quantize.
absl::StatusOr<at::Tensor> PackLinearWeight(const loader::Checkpoint& checkpoint,
                                            const BlockTensor& slot,
                                            const loader::QuantizeOptions& quantize) {
  if (const loader::QuantizedLinearSource* source = checkpoint.QuantizedLinear(slot.name)) {
    return loader::RepackQuantizedLinear(checkpoint, *source);
  }
  PLACER_ASSIGN_OR_RETURN(loader::PackedLayout layout,
                          PackedLayoutOfSlot(checkpoint, slot, quantize));
  PLACER_ASSIGN_OR_RETURN(at::Tensor stored, checkpoint.ReadTensor(slot.name));
  const at::Tensor weight = slot.linear == loader::LinearWeight::kInOut ? stored.t() : stored;
  return loader::QuantizeLinearWeight(weight, layout, slot.name);
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
  void set_quantize(const loader::QuantizeOptions& quantize) { quantize_ = quantize; }

  absl::StatusOr<at::Tensor> Read(const BlockTensor& slot, const Device& device) {
    const std::string& name = slot.name;
    const auto key = std::make_pair(name, device.Name());
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    const bool packed = PackedUnder(quantize_, slot) ||
                        checkpoint_->QuantizedLinear(name) != nullptr;
    absl::StatusOr<at::Tensor> read = packed ? ReadPacked(slot, device) : ReadUncached(name, device);
    PLACER_ASSIGN_OR_RETURN(at::Tensor tensor, std::move(read));
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

  // --quantize: packed in host memory once, then put where the plan says as any weight would
  // be; on disk, the packed copy in the offload store.
  absl::StatusOr<at::Tensor> ReadPacked(const BlockTensor& slot, const Device& device) {
    if (device.kind == DeviceKind::kDisk) {
      if (store_ == nullptr) return absl::InternalError("no offload store for packed weights");
      return store_->Read(slot.name);
    }
    PLACER_ASSIGN_OR_RETURN(at::Tensor packed, PackLinearWeight(*checkpoint_, slot, quantize_));
    if (device.is_gpu() && !virtual_gpus_) return packed.to(TorchDeviceOf(device, false));
    if (device.kind == DeviceKind::kCpu && pin_host_) return packed.pin_memory();
    // Held for the model's life and read end to end every step: a small one in 2 MiB pages too.
    if (device.kind == DeviceKind::kCpu) return loader::InHugePageArena(packed);
    return packed;  // a fresh tensor: a virtual GPU owns it
  }

  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  loader::QuantizeOptions quantize_;
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
  loader::PackedOffload packed_on_disk;
  std::map<std::string, BlockTensor> packed_slots;
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
      if (!checkpoint->HasSlot(tensor.name)) {
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
      const bool packed = PackedUnder(plan.quantize, tensor) ||
                          checkpoint->QuantizedLinear(tensor.name) != nullptr;
      if (device.kind == DeviceKind::kDisk && packed && packed_slots.count(tensor.name) == 0) {
        PLACER_ASSIGN_OR_RETURN(loader::PackedLayout layout,
                                PackedLayoutOfSlot(*checkpoint, tensor, plan.quantize));
        packed_on_disk.tensors.push_back(
            {tensor.name, layout.bits == 8 ? loader::DType::kI8 : loader::DType::kU8,
             {layout.out, layout.groups(), layout.block_bytes()}});
        packed_slots.emplace(tensor.name, tensor);
      } else if (device.kind == DeviceKind::kDisk && !packed &&
                 !StoredAs(*checkpoint, tensor.name, dtype)) {
        converted_on_disk.push_back(tensor.name);
      }
    }
    if (first) {
      return absl::InvalidArgumentError(
          absl::StrCat("block ", spec.module, " has none of its tensors in the checkpoint"));
    }
    bound.execution_device = placement::BlockExecutionDevice(
        bound.weights_device, spec.row_lookup, plan.execution_device);
    bound.staged = bound.weights_device.is_offload() && bound.execution_device.is_gpu();
    bound.spec = std::move(spec);
    bound_blocks.push_back(std::move(bound));
  }

  WeightReader reader(checkpoint, dtype, plan.virtual_gpus,
                      /*pin_host=*/gpu_execution && !plan.virtual_gpus,
                      accounting);
  reader.set_quantize(plan.quantize);
  if (!converted_on_disk.empty() || !packed_on_disk.tensors.empty()) {
    if (plan.offload_dir.empty()) {
      const std::string& first = converted_on_disk.empty() ? packed_on_disk.tensors.front().name
                                                           : converted_on_disk.front();
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", first,
          " goes to disk converted or quantized, which needs --offload-dir"));
    }
    // What the store's packed bytes stand for: a change (another --quantize-lm-head on the same
    // checkpoint) rebuilds it.
    packed_on_disk.scheme =
        !checkpoint->config().quantization ? loader::DescribeQuantizeOptions(plan.quantize)
        : plan.quantize.quantizes_lm_head()
            ? absl::StrCat(checkpoint->config().quantization->Describe(), "; ",
                           loader::DescribeQuantizeOptions(plan.quantize))
            : checkpoint->config().quantization->Describe();
    packed_on_disk.pack = [checkpoint, packed_slots, quantize = plan.quantize](const std::string& name) {
      return PackLinearWeight(*checkpoint, packed_slots.at(name), quantize);
    };
    PLACER_ASSIGN_OR_RETURN(auto store,
                            loader::OffloadStore::Open(checkpoint, plan.offload_dir,
                                                       converted_on_disk, dtype, packed_on_disk));
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
        PLACER_ASSIGN_OR_RETURN(at::Tensor read, reader.Read(tensor, block.weights_device));
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
