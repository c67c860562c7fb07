// Host memory a pipeline hop passes through (runtime/stage_link.h): Gloo sends and receives
// host tensors, so hidden states computed on a real GPU are copied out of it before a send
// and into it after a receive. Page-locked (pinned) host memory makes those copies DMA at the
// bus's speed and lets the copy onto the GPU run without blocking the host (DeviceTransfer
// moves pinned tensors non-blocking); pinning is slow, so the buffer is allocated once and
// reused across steps (grown, never shrunk), one per direction and dtype. Host tensors (CPU
// and virtual GPUs) need no copy and pass through as they are.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>

namespace placer::runtime {

class HopBuffer {
 public:
  // `pinned`: receive into page-locked memory (Take), for a rank that computes on a real GPU
  // (a build with CUDA). Copies out of a GPU (ToHost) are always pinned.
  explicit HopBuffer(bool pinned = false) : pinned_(pinned) {}

  // `tensor` in host memory, contiguous: a host tensor as it is (no copy when contiguous); a
  // GPU tensor copied into this buffer, the copy finished. Valid until the next call.
  at::Tensor ToHost(const at::Tensor& tensor);
  // `numel` values of `dtype` in this buffer (pinned as constructed), to receive or copy into.
  // Valid until the next call with the same dtype.
  at::Tensor Take(int64_t numel, at::ScalarType dtype) { return Take(numel, dtype, pinned_); }

  bool pinned() const { return pinned_; }

 private:
  at::Tensor Take(int64_t numel, at::ScalarType dtype, bool pinned);

  bool pinned_;
  std::map<std::pair<int, bool>, at::Tensor> buffers_;  // by (dtype, pinned)
};

}  // namespace placer::runtime
