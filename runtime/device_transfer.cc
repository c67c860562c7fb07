#include "runtime/device_transfer.h"

#include "runtime/host_copy.h"

namespace placer::runtime {
namespace {

uint64_t Bytes(const at::Tensor& tensor) {
  return static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
}

}  // namespace

at::Device TorchDeviceOf(const Device& device, bool virtual_gpus) {
  if (device.is_gpu() && !virtual_gpus) {
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.index));
  }
  return at::Device(at::kCPU);
}

at::Tensor DeviceTransfer::Move(const at::Tensor& tensor, const Device& from,
                                const Device& to) const {
  if (from == to || !tensor.defined()) return tensor;
  const at::Device target = TorchDeviceOf(to, virtual_gpus_);
  at::Tensor moved = tensor.device() == target
                         ? tensor.clone(at::MemoryFormat::Contiguous)
                         : tensor.to(target, /*non_blocking=*/tensor.is_pinned());
  if (accounting_ != nullptr) accounting_->AddTransfer(from.Name(), to.Name(), Bytes(tensor));
  return moved;
}

void DeviceTransfer::CopyInto(at::Tensor& destination, const at::Tensor& source,
                              const Device& from, const Device& to, bool background) const {
  if (background && destination.is_cpu() && source.is_cpu() && destination.is_contiguous() &&
      source.is_contiguous() && destination.scalar_type() == source.scalar_type() &&
      destination.sizes() == source.sizes()) {
    CopyHostBytes(destination.data_ptr(), source.data_ptr(), Bytes(source));
  } else {
    destination.copy_(source, /*non_blocking=*/source.is_pinned());
  }
  if (accounting_ != nullptr) accounting_->AddTransfer(from.Name(), to.Name(), Bytes(source));
}

}  // namespace placer::runtime
