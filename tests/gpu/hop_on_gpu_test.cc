// A pipeline hop's host memory on a real GPU: the boundary's hidden states leave the GPU
// through one pinned buffer reused across steps, and a rank computing on a GPU receives into
// pinned memory, from which the copy onto the GPU does not block the host.
#include <gtest/gtest.h>

#include "runtime/hop_buffer.h"
#include "tests/gpu/gpu_skip.h"

namespace placer::runtime {
namespace {

TEST(HopOnGpu, GpuHiddenStatesLeaveThroughOneReusedPinnedBuffer) {
  PLACER_SKIP_WITHOUT_GPU();
  HopBuffer buffer;
  const at::Tensor hidden = at::randn({4, 256}, at::TensorOptions().device(at::kCUDA));
  const at::Tensor host = buffer.ToHost(hidden);
  EXPECT_TRUE(host.is_cpu());
  EXPECT_TRUE(host.is_pinned());
  EXPECT_EQ(host.sizes(), hidden.sizes());
  EXPECT_TRUE(at::equal(host, hidden.cpu()));
  const void* storage = host.data_ptr();
  const at::Tensor next = buffer.ToHost(at::randn({1, 256}, at::TensorOptions().device(at::kCUDA)));
  EXPECT_EQ(next.data_ptr(), storage) << "the next step reuses the pinned buffer";
  EXPECT_TRUE(next.is_pinned());
}

TEST(HopOnGpu, PinnedReceiveBuffersAreReusedAcrossSteps) {
  PLACER_SKIP_WITHOUT_GPU();
  HopBuffer buffer(/*pinned=*/true);
  at::Tensor received = buffer.Take(1024, at::kBFloat16);
  EXPECT_TRUE(received.is_pinned());
  received.fill_(2);
  const at::Tensor on_gpu = received.to(at::kCUDA, /*non_blocking=*/true);
  EXPECT_TRUE(at::equal(on_gpu.cpu(), received));
  EXPECT_EQ(buffer.Take(512, at::kBFloat16).data_ptr(), received.data_ptr());
}

}  // namespace
}  // namespace placer::runtime
