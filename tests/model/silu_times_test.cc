// SiluTimes, the MLP's gated activation in BF16: the activation and the product each rounded
// once from a float64 reference on every tail length and on extremes (overflowing exp, tiny
// results), NaN and infinities as ATen gives them; float32 and other operands left to ATen.
#include "model/silu_times.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace placer::model {
namespace {

// Random gates and ups, then extremes in the first elements.
std::pair<at::Tensor, at::Tensor> Operands(int64_t count, int seed) {
  at::manual_seed(seed);
  at::Tensor gate = at::randn({count}) * 6;
  const at::Tensor up = at::randn({count}) * 3;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> extremes = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 87.0f, -87.0f,
                                       89.0f, -89.0f, 104.0f, -104.0f, 1e4f, -1e4f, inf};
  for (size_t i = 0; i < extremes.size() && static_cast<int64_t>(i) < count; ++i) {
    gate[static_cast<int64_t>(i)] = extremes[i];
  }
  return {gate, up};
}

class SiluTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SiluTimesRuns()) GTEST_SKIP() << "this CPU lacks AVX-512F/BW/VL: ATen's operations run";
  }
};

TEST_F(SiluTimesTest, NanAndInfinitiesGiveWhatAtenGives) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor gate = at::tensor(std::vector<float>{nan, -inf, inf, 1.0f, inf}).to(at::kBFloat16);
  const at::Tensor up = at::tensor(std::vector<float>{1.0f, 1.0f, 2.0f, nan, -3.0f}).to(at::kBFloat16);
  const at::Tensor ours = SiluTimes(gate, up).to(at::kFloat);
  const at::Tensor aten = (at::silu(gate) * up).to(at::kFloat);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(std::isnan(ours[i].item<float>()), std::isnan(aten[i].item<float>())) << i;
    if (!std::isnan(aten[i].item<float>())) {
      EXPECT_EQ(ours[i].item<float>(), aten[i].item<float>()) << i;
    }
  }
}

TEST_F(SiluTimesTest, Bf16RoundsTheActivationOnceAndTheProductOnce) {
  for (int64_t count : {1, 15, 16, 17, 33, 4099}) {
    SCOPED_TRACE(count);
    auto [gate32, up32] = Operands(count, static_cast<int>(count));
    const at::Tensor gate = gate32.to(at::kBFloat16), up = up32.to(at::kBFloat16);
    const at::Tensor ours = SiluTimes(gate, up);
    ASSERT_EQ(ours.scalar_type(), at::kBFloat16);
    ASSERT_EQ(ours.sizes(), gate.sizes());
    // The exact activation rounded to BF16, times up (exact in float64), rounded to BF16.
    const at::Tensor g64 = gate.to(at::kDouble);
    const at::Tensor activation = (g64 / (1 + at::exp(-g64))).to(at::kFloat).to(at::kBFloat16);
    const at::Tensor want =
        (activation.to(at::kDouble) * up.to(at::kDouble)).to(at::kFloat).to(at::kBFloat16);
    const at::Tensor same = (ours == want) | (at::isnan(ours) & at::isnan(want));
    // Our exp's ~1e-7 error moves an activation across a BF16 rounding boundary (2^-9 relative
    // apart) for about one element in ten thousand.
    EXPECT_LE(count - same.sum().item<int64_t>(), 4);
    if (count < 4099) continue;
    // ATen's BF16 silu rounds exp(-g) and 1 + exp(-g) to BF16 too: further from exact than this.
    const at::Tensor aten = at::silu(gate) * up;
    const at::Tensor finite = at::isfinite(want.to(at::kDouble));
    const auto error = [&](const at::Tensor& y) {
      const at::Tensor difference = (y.to(at::kDouble) - want.to(at::kDouble)).abs();
      return at::where(finite, difference, at::zeros_like(difference)).sum().item<double>();
    };
    EXPECT_LE(error(ours), error(aten));
  }
}

TEST(SiluTimes, LeavesFloat32AndOtherOperandsToAtenBitForBit) {
  auto [gate32, up32] = Operands(1000, 9);
  EXPECT_TRUE(at::equal(SiluTimes(gate32, up32), at::silu(gate32) * up32));
  const at::Tensor gate = at::randn({8, 6});
  const at::Tensor up = at::randn({6, 8}).t();  // strided
  ASSERT_FALSE(up.is_contiguous());
  EXPECT_TRUE(at::equal(SiluTimes(gate, up), at::silu(gate) * up));
  const at::Tensor g64 = gate.to(at::kDouble), u64 = at::randn({8, 6}).to(at::kDouble);
  EXPECT_TRUE(at::equal(SiluTimes(g64, u64), at::silu(g64) * u64));
}

}  // namespace
}  // namespace placer::model
