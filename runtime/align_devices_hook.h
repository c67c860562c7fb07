// Accelerate's AlignDevicesHook: a block's inputs are moved onto its execution device before
// it runs, and the pass's output back to host memory at the end, with every move counted
// (DeviceTransfer). The model's code never names a device.
#pragma once

#include "runtime/block_hook.h"

namespace placer::runtime {

class AlignDevicesHook final : public BlockHook {
 public:
  explicit AlignDevicesHook(const DeviceTransfer& transfer) : transfer_(transfer) {}

  void BeginPass() override { current_ = Device::Cpu(); }
  void Enter(BlockCall& call) override;
  void EndPass(at::Tensor* output) override;

 private:
  const DeviceTransfer& transfer_;
  Device current_ = Device::Cpu();  // where the activations are between blocks
};

}  // namespace placer::runtime
