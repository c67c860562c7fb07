// HugePageZeros: zero-filled tensors of the asked shape whose large buffers start on a 2 MiB
// boundary and carry the kernel's MADV_HUGEPAGE flag (the "hg" of /proc/self/smaps VmFlags),
// usable and writable like any tensor, and given back to the kernel when the last user goes.
// InHugePageArena: small CPU tensors copied into shared 2 MiB-aligned advised arenas, each
// given back with the last tensor in it; everything else returned as it is.
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

// A small-preset q_proj packed at 4 bits in groups of 128 (332 KiB: under 2 MiB, so ordinary
// memory from QuantizeLinearWeight).
at::Tensor PackedSmallPresetWeight() {
  const PackedLayout layout{4, 768, 768, 128};
  absl::StatusOr<at::Tensor> packed =
      QuantizeLinearWeight(at::randn({layout.out, layout.in}) * 0.02, layout, "q_proj");
  EXPECT_TRUE(packed.ok()) << packed.status();
  EXPECT_FALSE(IsHugePageMapping(*packed));
  return *packed;
}

TEST(InHugePageArena, SmallTensorsAreCopiedIntoAlignedAdvisedArenas) {
  at::manual_seed(5);
  const std::vector<at::Tensor> originals = {
      at::randint(-128, 127, {64, 1024}, at::kChar),                 // 64 KiB
      at::randn({100, 77}),                                          // not a whole cache line
      at::randint(0, 255, {kHugePage - 1}, at::kByte),               // the largest
      PackedSmallPresetWeight()};
  std::vector<at::Tensor> copies;
  for (const at::Tensor& original : originals) {
    const at::Tensor copy = InHugePageArena(original);
    ASSERT_TRUE(IsHugePageMapping(copy));
    EXPECT_NE(copy.data_ptr(), original.data_ptr());
    EXPECT_EQ(copy.sizes(), original.sizes());
    EXPECT_EQ(copy.scalar_type(), original.scalar_type());
    EXPECT_TRUE(at::equal(copy, original));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data_ptr()) % 256, 0u);
    if (KernelHasTransparentHugePages()) {
      const std::string flags = VmFlagsAt(copy.data_ptr());
      EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
    }
    copies.push_back(copy);
  }
  // No two share a byte, and each stays itself while the others are written.
  for (size_t i = 0; i < copies.size(); ++i) {
    for (size_t j = i + 1; j < copies.size(); ++j) {
      const auto* a = static_cast<const uint8_t*>(copies[i].data_ptr());
      const auto* b = static_cast<const uint8_t*>(copies[j].data_ptr());
      EXPECT_TRUE(a + copies[i].nbytes() <= b || b + copies[j].nbytes() <= a) << i << " " << j;
    }
  }
  copies[0].fill_(3);
  for (size_t i = 1; i < copies.size(); ++i) EXPECT_TRUE(at::equal(copies[i], originals[i])) << i;
  EXPECT_TRUE(PackedLayoutOf(copies[3]).has_value());
}

TEST(InHugePageArena, OthersAreReturnedAsTheyAre) {
  const auto same = [](const at::Tensor& t) {
    const at::Tensor back = InHugePageArena(t);
    return back.defined() && back.data_ptr() == t.data_ptr() && back.sizes() == t.sizes();
  };
  EXPECT_TRUE(same(at::zeros({kHugePage}, at::kByte)));          // 2 MiB: a mapping of its own
  EXPECT_TRUE(same(at::randn({64, 32}).t()));                      // strided
  EXPECT_TRUE(same(at::zeros({0}, at::kFloat)));                   // empty
  const at::Tensor in_arena = InHugePageArena(at::randn({256}));
  EXPECT_TRUE(same(in_arena));                                     // already there
  EXPECT_FALSE(InHugePageArena(at::Tensor()).defined());
}

TEST(InHugePageArena, AnArenaIsGivenBackWithTheLastTensorInIt) {
  // 1 MiB tensors: 16 fill the first 16 MiB arena, the 17th opens a second.
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 17; ++i) {
    tensors.push_back(InHugePageArena(at::full({int64_t{1} << 20}, i, at::kByte)));
    ASSERT_TRUE(IsHugePageMapping(tensors.back()));
  }
  const void* first = tensors[0].data_ptr();
  const void* last = tensors[16].data_ptr();
  ASSERT_NE(VmFlagsAt(first), "");
  // All but one of the full arena's tensors freed: it stays mapped for that one.
  at::Tensor kept = tensors[7];
  for (int i = 0; i < 16; ++i) tensors[i].reset();
  ASSERT_NE(VmFlagsAt(first), "");
  EXPECT_EQ(kept[0].item<uint8_t>(), 7);
  kept.reset();
  EXPECT_EQ(VmFlagsAt(first), "") << "the full arena is unmapped with its last tensor";
  // The arena being filled too, once nothing is in it.
  tensors[16].reset();
  EXPECT_EQ(VmFlagsAt(last), "") << "the filling arena is unmapped once empty";
}

}  // namespace
}  // namespace placer::loader
