// The host memory a pipeline hop passes through: host tensors pass as they are, buffers are
// reused across steps (grown, never shrunk) per dtype. The copy out of a real GPU into pinned
// memory is tested in tests/gpu (SKIPPED without CUDA).
#include "runtime/hop_buffer.h"

#include <gtest/gtest.h>

namespace placer::runtime {
namespace {

TEST(HopBufferTest, HostTensorsPassWithoutACopy) {
  HopBuffer buffer;
  const at::Tensor hidden = at::randn({3, 8});
  const at::Tensor host = buffer.ToHost(hidden);
  EXPECT_EQ(host.data_ptr(), hidden.data_ptr()) << "a contiguous host tensor is not copied";
  const at::Tensor strided = at::randn({8, 3}).t();
  const at::Tensor packed = buffer.ToHost(strided);
  EXPECT_TRUE(packed.is_contiguous());
  EXPECT_TRUE(at::equal(packed, strided));
  EXPECT_FALSE(buffer.pinned());
}

TEST(HopBufferTest, TakeReusesOneBufferPerDtypeAcrossSteps) {
  HopBuffer buffer;
  const at::Tensor first = buffer.Take(12, at::kFloat);
  ASSERT_EQ(first.numel(), 12);
  const void* storage = first.data_ptr();
  first.fill_(1.5f);
  const at::Tensor smaller = buffer.Take(5, at::kFloat);
  EXPECT_EQ(smaller.numel(), 5);
  EXPECT_EQ(smaller.data_ptr(), storage) << "a smaller step reuses the buffer";
  const at::Tensor other = buffer.Take(12, at::kBFloat16);
  EXPECT_EQ(other.scalar_type(), at::kBFloat16);
  EXPECT_NE(other.data_ptr(), storage) << "each dtype has its own buffer";
  EXPECT_EQ(buffer.Take(12, at::kFloat).data_ptr(), storage) << "and the first is kept";
  const at::Tensor larger = buffer.Take(4096, at::kFloat);
  EXPECT_EQ(larger.numel(), 4096) << "a larger step grows it";
  EXPECT_EQ(buffer.Take(64, at::kFloat).data_ptr(), larger.data_ptr()) << "never shrunk";
  EXPECT_FALSE(larger.is_pinned());
}

}  // namespace
}  // namespace placer::runtime
