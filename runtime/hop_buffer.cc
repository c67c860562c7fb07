#include "runtime/hop_buffer.h"

namespace placer::runtime {

at::Tensor HopBuffer::Take(int64_t numel, at::ScalarType dtype, bool pinned) {
  at::Tensor& buffer = buffers_[{static_cast<int>(dtype), pinned}];
  if (!buffer.defined() || buffer.numel() < numel) {
    buffer = at::empty({numel}, at::TensorOptions().dtype(dtype).pinned_memory(pinned));
  }
  return buffer.narrow(0, 0, numel);
}

at::Tensor HopBuffer::ToHost(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return tensor.is_cpu() ? tensor.contiguous() : tensor.to(at::kCPU).contiguous();
  at::Tensor host = Take(tensor.numel(), tensor.scalar_type(), /*pinned=*/true).view(tensor.sizes());
  // Blocking: Gloo reads the buffer as soon as this returns.
  host.copy_(tensor, /*non_blocking=*/false);
  return host;
}

}  // namespace placer::runtime
