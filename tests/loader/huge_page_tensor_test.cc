// HugePageZeros: zero-filled tensors of the asked shape whose large buffers start on a 2 MiB
// boundary and carry the kernel's MADV_HUGEPAGE flag (the "hg" of /proc/self/smaps VmFlags),
// usable and writable like any tensor, and given back to the kernel when the last user goes.
#include "loader/huge_page_tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "loader/quantized_weight.h"
#include "tests/loader/smaps_line.h"

namespace placer::loader {
namespace {

constexpr int64_t kHugePage = int64_t{2} << 20;

// The VmFlags line of the /proc/self/smaps mapping that contains `address`; empty if none does.
std::string VmFlagsAt(const void* address) { return SmapsLineAt(address, "VmFlags:"); }

bool KernelHasTransparentHugePages() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  return modes.find("[never]") == std::string::npos && !modes.empty();
}

TEST(HugePageZeros, LargeBuffersAreAlignedZeroedAndAdvised) {
  // Sizes that are not a whole number of 4 KiB pages, nor of 2 MiB ones.
  for (const std::vector<int64_t>& sizes :
       std::vector<std::vector<int64_t>>{{3 * 1024 * 1024 + 5}, {2048, 16, 72}, {5632, 7, 61}}) {
    const at::Tensor t = HugePageZeros(sizes, at::kByte);
    ASSERT_EQ(t.sizes(), at::IntArrayRef(sizes));
    ASSERT_TRUE(t.is_contiguous());
    ASSERT_GE(t.nbytes(), static_cast<size_t>(kHugePage));
    EXPECT_TRUE(IsHugePageMapping(t));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHugePage, 0u);
    EXPECT_EQ(t.count_nonzero().item<int64_t>(), 0);
    t.fill_(7);  // writable to its last byte
    EXPECT_EQ(t.sum().item<int64_t>(), 7 * t.numel());
    if (KernelHasTransparentHugePages()) {
      const std::string flags = VmFlagsAt(t.data_ptr());
      EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
    }
  }
  const at::Tensor floats = HugePageZeros({1024, 1024}, at::kFloat);  // 4 MiB of float32
  EXPECT_TRUE(IsHugePageMapping(floats));
  EXPECT_EQ(floats.scalar_type(), at::kFloat);
  EXPECT_EQ(floats.abs().sum().item<float>(), 0.0f);
}

TEST(HugePageZeros, SmallBuffersAreOrdinaryZeros) {
  const at::Tensor t = HugePageZeros({64, 1024}, at::kChar);  // 64 KiB
  EXPECT_FALSE(IsHugePageMapping(t));
  EXPECT_EQ(t.count_nonzero().item<int64_t>(), 0);
  EXPECT_FALSE(IsHugePageMapping(at::zeros({kHugePage}, at::kByte)));
}

TEST(HugePageZeros, TheMappingIsGivenBackWithItsLastUser) {
  void* address = nullptr;
  {
    at::Tensor t = HugePageZeros({4 * kHugePage}, at::kByte);
    address = t.data_ptr();
    at::Tensor view = t.slice(0, kHugePage);  // shares the storage
    t.reset();
    ASSERT_NE(VmFlagsAt(address), "") << "the view still holds the mapping";
    EXPECT_EQ(view[0].item<uint8_t>(), 0);
  }
  EXPECT_EQ(VmFlagsAt(address), "") << "unmapped once the view is gone";
}

TEST(HugePageZeros, LargePackedWeightsLiveInThem) {
  // 2048 x 2048 in 4-bit groups of 128: 2048 x 16 blocks of 72 bytes = 2.25 MiB.
  const PackedLayout layout{4, 2048, 2048, 128};
  absl::StatusOr<at::Tensor> packed =
      QuantizeLinearWeight(at::randn({layout.out, layout.in}) * 0.02, layout, "w");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_TRUE(IsHugePageMapping(*packed));
  EXPECT_TRUE(PackedLayoutOf(*packed).has_value());
}

}  // namespace
}  // namespace placer::loader
