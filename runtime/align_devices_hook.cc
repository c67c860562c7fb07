#include "runtime/align_devices_hook.h"

namespace placer::runtime {

void AlignDevicesHook::Enter(BlockCall& call) {
  const Device& target = call.bound->execution_device;
  for (at::Tensor* activation : call.activations) {
    *activation = transfer_.Move(*activation, current_, target);
  }
  current_ = target;
}

void AlignDevicesHook::EndPass(at::Tensor* output) {
  if (output != nullptr) *output = transfer_.Move(*output, current_, Device::Cpu());
  current_ = Device::Cpu();
}

}  // namespace placer::runtime
