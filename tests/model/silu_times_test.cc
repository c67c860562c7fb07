// SiluTimes, the MLP's gated activation in BF16: the activation and the product each rounded
// once from a float64 reference on every tail length and on extremes (overflowing exp, tiny
// results), NaN and infinities as ATen gives them; float32 fused with ATen's bits where ATen's
// kernel is vector through and through, and left to ATen elsewhere.
#include "model/silu_times.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// Bit for bit, NaN included (ATen's NaN keeps the gate's sign and payload through the same ops).
bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.contiguous().data_ptr<float>(),
                                               b.contiguous().data_ptr<float>(),
                                               static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

TEST(SiluTimes, Float32IsFusedWithAtensBitsOnEveryDecodeRowWidth) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "this CPU lacks AVX2/FMA: ATen's scalar kernel, and ATen's operations here";
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The small preset's and TinyLlama's intermediate widths, a batch of rows, the largest fused.
  for (int64_t count : {32, 2048, 5632, 4 * 2048, 32736}) {
    SCOPED_TRACE(count);
    auto [gate, up] = Operands(count, static_cast<int>(count) + 1);
    gate[count - 1] = nan;
    gate[count - 2] = -nan;
    up[count - 3] = nan;
    gate[count - 4] = -std::numeric_limits<float>::infinity();
    // Built with SLEEF (scripts/install-deps.sh installs it): the fused pass must run here.
    ASSERT_TRUE(SiluTimesFusesFloat32(gate, up));
    EXPECT_TRUE(SameBits(SiluTimes(gate, up), at::silu(gate) * up));
    const at::Tensor rows_gate = gate.view({-1, 32}), rows_up = up.view({-1, 32});
    EXPECT_TRUE(SameBits(SiluTimes(rows_gate, rows_up), at::silu(rows_gate) * rows_up));
  }
}

TEST(SiluTimes, Float32OutsideTheFusedFormAndOtherOperandsGoToAtenBitForBit) {
  // Lengths with a scalar remainder in ATen's loop, and one ATen splits among threads.
  for (int64_t count : {1, 31, 1000, 2047, 32768}) {
    SCOPED_TRACE(count);
    auto [gate32, up32] = Operands(count, 9);
    EXPECT_FALSE(SiluTimesFusesFloat32(gate32, up32));
    EXPECT_TRUE(SameBits(SiluTimes(gate32, up32), at::silu(gate32) * up32));
  }
  const at::Tensor gate = at::randn({8, 32});
  const at::Tensor up = at::randn({32, 8}).t();  // strided
  ASSERT_FALSE(up.is_contiguous());
  EXPECT_FALSE(SiluTimesFusesFloat32(gate, up));
  EXPECT_TRUE(at::equal(SiluTimes(gate, up), at::silu(gate) * up));
  const at::Tensor g64 = gate.to(at::kDouble), u64 = at::randn({8, 32}).to(at::kDouble);
  EXPECT_FALSE(SiluTimesFusesFloat32(g64, u64));
  EXPECT_TRUE(at::equal(SiluTimes(g64, u64), at::silu(g64) * u64));
}

}  // namespace
}  // namespace placer::model
