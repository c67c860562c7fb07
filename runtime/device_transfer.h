// Moving tensors between placer devices, counted. A virtual GPU is host memory, so a move to
// or from it is a real copy in host memory (the bytes a real GPU would receive); a real GPU
// gets a real device copy.
#pragma once

#include <ATen/ATen.h>

#include "placement/device.h"
#include "runtime/runtime_accounting.h"

namespace placer::runtime {

// The planner's words, used unqualified by the run time.
using placement::Device;
using placement::DeviceKind;

// The libtorch device that backs a placer device: cpu and disk are host memory, a GPU is
// cuda:N unless GPUs are virtual.
at::Device TorchDeviceOf(const Device& device, bool virtual_gpus);

class DeviceTransfer {
 public:
  DeviceTransfer(bool virtual_gpus, RuntimeAccounting* accounting)
      : virtual_gpus_(virtual_gpus), accounting_(accounting) {}

  // `tensor` as it would live on `to`: itself when from == to, else a copy (counted under
  // from -> to). Host-to-GPU copies of pinned memory do not block the calling thread.
  at::Tensor Move(const at::Tensor& tensor, const Device& from, const Device& to) const;

  // Copies `source` into the preallocated `destination` (staging), counted under from -> to.
  // A `background` copy between host buffers (a virtual GPU) runs on the calling thread alone,
  // as a copy engine would, leaving the other cores to compute; otherwise compute is waiting
  // for it, and it uses every thread.
  void CopyInto(at::Tensor& destination, const at::Tensor& source, const Device& from,
                const Device& to, bool background) const;

  bool virtual_gpus() const { return virtual_gpus_; }
  RuntimeAccounting* accounting() const { return accounting_; }

 private:
  bool virtual_gpus_;
  RuntimeAccounting* accounting_;
};

}  // namespace placer::runtime
