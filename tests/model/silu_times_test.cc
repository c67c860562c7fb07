// SiluTimes, the MLP's gated activation: float32 within a few ulp of a float64 silu(g) * u on
// every tail length and on extremes (overflowing exp, denormal results, infinities, NaN); BF16
// with the activation and the product each rounded once; and what it leaves to ATen.
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

TEST_F(SiluTimesTest, Float32IsWithinAFewUlpOfFloat64OnEveryTailAndExtreme) {
  for (int64_t count : {1, 15, 16, 17, 33, 1000}) {
    auto [gate, up] = Operands(count, static_cast<int>(count));
    const at::Tensor y = SiluTimes(gate, up);
    ASSERT_EQ(y.scalar_type(), at::kFloat);
    ASSERT_EQ(y.sizes(), gate.sizes());
    const at::Tensor g64 = gate.to(at::kDouble);
    const at::Tensor want = g64 / (1 + at::exp(-g64)) * up.to(at::kDouble);
    for (int64_t i = 0; i < count; ++i) {
      const double got = y[i].item<double>(), expected = want[i].item<double>();
      if (std::isnan(expected) || std::isinf(expected)) {
        EXPECT_TRUE(std::isnan(expected) ? std::isnan(got) : got == expected)
            << "gate " << gate[i].item<float>() << ": " << got << " for " << expected;
        continue;
      }
      // (Past gates of about -88, exp(-g) overflows float32 and the activation is a signed 0,
      // as ATen's float32 silu gives, where float64 still has ~1e-37.)
      EXPECT_NEAR(got, expected, std::abs(expected) * 1e-6 + 1e-30)
          << "count " << count << " element " << i << " gate " << gate[i].item<float>()
          << " up " << up[i].item<float>();
    }
  }
}

TEST_F(SiluTimesTest, NanAndNegativeInfinityGiveNanAsAtenDoes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor gate = at::tensor(std::vector<float>{nan, -inf, inf, 1.0f});
  const at::Tensor up = at::tensor(std::vector<float>{1.0f, 1.0f, 2.0f, nan});
  const at::Tensor ours = SiluTimes(gate, up);
  const at::Tensor aten = at::silu(gate) * up;
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(std::isnan(ours[i].item<float>()), std::isnan(aten[i].item<float>())) << i;
    if (!std::isnan(aten[i].item<float>())) {
      EXPECT_EQ(ours[i].item<float>(), aten[i].item<float>()) << i;
    }
  }
}

TEST_F(SiluTimesTest, Bf16RoundsTheActivationOnceAndTheProductOnce) {
  auto [gate32, up32] = Operands(4099, 5);
  const at::Tensor gate = gate32.to(at::kBFloat16), up = up32.to(at::kBFloat16);
  const at::Tensor ours = SiluTimes(gate, up);
  ASSERT_EQ(ours.scalar_type(), at::kBFloat16);
  // The exact activation rounded to BF16, times up (exact in float64), rounded to BF16.
  const at::Tensor g64 = gate.to(at::kDouble);
  const at::Tensor activation = (g64 / (1 + at::exp(-g64))).to(at::kFloat).to(at::kBFloat16);
  const at::Tensor want = (activation.to(at::kDouble) * up.to(at::kDouble)).to(at::kFloat).to(at::kBFloat16);
  const at::Tensor same = (ours == want) | (at::isnan(ours) & at::isnan(want));
  // Our exp's ~1e-7 error moves an activation across a BF16 rounding boundary (2^-9 relative
  // apart) for about one element in ten thousand.
  EXPECT_LE(4099 - same.sum().item<int64_t>(), 4);
  // ATen's BF16 silu rounds exp(-g) and 1 + exp(-g) to BF16 too: further from exact than this.
  const at::Tensor aten = at::silu(gate) * up;
  const at::Tensor finite = at::isfinite(want.to(at::kDouble));
  const auto error = [&](const at::Tensor& y) {
    const at::Tensor difference = (y.to(at::kDouble) - want.to(at::kDouble)).abs();
    return at::where(finite, difference, at::zeros_like(difference)).sum().item<double>();
  };
  EXPECT_LE(error(ours), error(aten));
}

TEST(SiluTimes, LeavesOtherOperandsToAten) {
  const at::Tensor gate = at::randn({8, 6});
  const at::Tensor up = at::randn({6, 8}).t();  // strided
  ASSERT_FALSE(up.is_contiguous());
  EXPECT_TRUE(at::equal(SiluTimes(gate, up), at::silu(gate) * up));
  const at::Tensor g64 = gate.to(at::kDouble), u64 = at::randn({8, 6}).to(at::kDouble);
  EXPECT_TRUE(at::equal(SiluTimes(g64, u64), at::silu(g64) * u64));
}

}  // namespace
}  // namespace placer::model
