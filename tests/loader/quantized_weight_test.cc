// --quantize's packing: the layout read back off the tensor, quantization error within half a
// step of each group's grid, the nibble order the layout documents (checked on raw bytes),
// and every flag or shape the packer refuses named.
#include "loader/quantized_weight.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace placer::loader {
namespace {

at::Tensor Weight(int64_t out, int64_t in, int seed) {
  at::manual_seed(seed);
  return at::randn({out, in}) * 0.02;
}

TEST(QuantizedWeight, LayoutIsReadBackOffTheTensor) {
  for (const PackedLayout layout : {PackedLayout{8, 6, 40, 40}, PackedLayout{8, 3, 48, 16},
                                    PackedLayout{4, 5, 256, 128}, PackedLayout{4, 2, 64, 32}}) {
    absl::StatusOr<at::Tensor> packed = QuantizeLinearWeight(Weight(layout.out, layout.in, 1), layout, "w");
    ASSERT_TRUE(packed.ok()) << packed.status();
    EXPECT_EQ(static_cast<uint64_t>(packed->numel()), layout.bytes());
    const std::optional<PackedLayout> read = PackedLayoutOf(*packed);
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(read->bits, layout.bits);
    EXPECT_EQ(read->out, layout.out);
    EXPECT_EQ(read->in, layout.in);
    EXPECT_EQ(read->group_size, layout.group_size);
  }
  EXPECT_FALSE(PackedLayoutOf(Weight(4, 8, 1)).has_value());
  EXPECT_FALSE(PackedLayoutOf(at::zeros({4, 1, 8}, at::kByte)).has_value());  // no payload
  EXPECT_FALSE(PackedLayoutOf(at::zeros({4, 1, 12}, at::kByte)).has_value());  // 8 codes: not 32
}

TEST(QuantizedWeight, DequantizedWeightIsWithinHalfAStepOfTheOriginal) {
  for (const PackedLayout layout : {PackedLayout{8, 33, 96, 96}, PackedLayout{8, 4, 96, 32},
                                    PackedLayout{4, 33, 256, 32}, PackedLayout{4, 7, 256, 128}}) {
    SCOPED_TRACE(testing::Message() << layout.bits << " bits, groups of " << layout.group_size);
    const at::Tensor w = Weight(layout.out, layout.in, 2);
    const at::Tensor packed = *QuantizeLinearWeight(w, layout, "w");
    const at::Tensor back = DequantizeLinearWeight(packed, at::kFloat);
    const at::Tensor grouped = w.view({layout.out, layout.groups(), layout.group_size});
    const at::Tensor step = layout.bits == 8 ? grouped.abs().amax(-1) / 127
                                             : (grouped.amax(-1) - grouped.amin(-1)) / 15;
    const at::Tensor error = (back - w).abs().view_as(grouped);
    EXPECT_TRUE(at::all(error <= step.unsqueeze(-1) * 0.5001 + 1e-9).item<bool>())
        << "worst " << (error - step.unsqueeze(-1) * 0.5).max().item<double>();
    // And into a reused BF16 buffer: the same weights, rounded once.
    at::Tensor scratch;
    const at::Tensor bf16 = DequantizeLinearWeight(packed, at::kBFloat16, &scratch);
    EXPECT_TRUE(at::equal(bf16, back.to(at::kBFloat16)));
  }
}

TEST(QuantizedWeight, NibblesAndHeadersSitWhereTheLayoutSays) {
  const PackedLayout layout{4, 1, 64, 32};
  at::Tensor codes = at::arange(64, at::kInt).remainder(16).view({1, 64});
  const at::Tensor scales = at::tensor({0.5f, 2.0f}).view({1, 2});
  const at::Tensor offsets = at::tensor({-1.0f, 3.0f}).view({1, 2});
  const at::Tensor packed = PackLinearWeight(codes, scales, offsets, layout);
  ASSERT_EQ(packed.sizes(), (at::IntArrayRef{1, 2, 8 + 16}));
  const uint8_t* bytes = static_cast<const uint8_t*>(packed.data_ptr());
  float scale, offset;
  std::memcpy(&scale, bytes + 24, 4);
  std::memcpy(&offset, bytes + 28, 4);
  EXPECT_EQ(scale, 2.0f);
  EXPECT_EQ(offset, 3.0f);
  // Byte j of a 32-input run: input j low, input j + 16 high.
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(bytes[8 + j] & 0xF, j % 16);
    EXPECT_EQ(bytes[8 + j] >> 4, (j + 16) % 16);
  }
  const at::Tensor w = DequantizeLinearWeight(packed, at::kFloat);
  EXPECT_EQ(w[0][5].item<float>(), 5 * 0.5f - 1.0f);
  EXPECT_EQ(w[0][32 + 7].item<float>(), 7 * 2.0f + 3.0f);
}

TEST(QuantizedWeight, TensorOperationsGiveTheSameWeightsOnAnyDevice) {
  for (const PackedLayout layout : {PackedLayout{8, 5, 96, 96}, PackedLayout{8, 3, 64, 16},
                                    PackedLayout{4, 6, 256, 32}, PackedLayout{4, 2, 256, 128}}) {
    const at::Tensor packed = *QuantizeLinearWeight(Weight(layout.out, layout.in, 4), layout, "w");
    const at::Tensor fused = DequantizeLinearWeight(packed, at::kFloat);
    const at::Tensor ops = DequantizeLinearWeightOnDevice(packed, at::kFloat);
    ASSERT_EQ(ops.sizes(), fused.sizes());
    // q * s + m rounds twice where fma rounds once: within an ulp of q * s (weights ~0.1 here,
    // so 1e-8 where they cancel to near zero).
    EXPECT_TRUE(at::allclose(ops, fused, 1e-6, 1e-8)) << (ops - fused).abs().max().item<float>();
  }
}

// The formulas of quantized_weight.h as tensor operations: what QuantizeLinearWeight computed
// before it went row by row (a copy of the whole weight per step), kept as the reference.
at::Tensor QuantizedByTensorFormulas(const at::Tensor& weight, const PackedLayout& layout) {
  const at::Tensor w = weight.to(at::kFloat).contiguous().view({layout.out, layout.groups(),
                                                                layout.group_size});
  at::Tensor scales, offsets, codes;
  if (layout.bits == 8) {
    scales = w.abs().amax(-1) / 127.0f;
    offsets = at::zeros_like(scales);
    const at::Tensor safe = at::where(scales > 0, scales, at::ones_like(scales));
    codes = at::round(w / safe.unsqueeze(-1)).clamp(-127, 127);
  } else {
    const at::Tensor low = w.amin(-1), high = w.amax(-1);
    scales = (high - low) / 15.0f;
    const at::Tensor safe = at::where(scales > 0, scales, at::ones_like(scales));
    const at::Tensor zero = at::where(scales > 0, at::round(-low / safe), at::zeros_like(low));
    codes = (at::round(w / safe.unsqueeze(-1)) + zero.unsqueeze(-1)).clamp(0, 15);
    offsets = -zero * scales;
  }
  return PackLinearWeight(codes.view({layout.out, layout.in}), scales, offsets, layout);
}

// Every block's bytes equal, except that a NaN scale or offset need only be NaN in both.
void ExpectSamePackedBytes(const at::Tensor& got, const at::Tensor& want, const PackedLayout& layout) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const uint8_t* a = static_cast<const uint8_t*>(got.data_ptr());
  const uint8_t* b = static_cast<const uint8_t*>(want.data_ptr());
  const int64_t block = layout.block_bytes();
  for (int64_t i = 0; i < layout.out * layout.groups(); ++i) {
    const uint8_t* x = a + i * block;
    const uint8_t* y = b + i * block;
    for (int h = 0; h < 2; ++h) {
      float u, v;
      std::memcpy(&u, x + 4 * h, 4);
      std::memcpy(&v, y + 4 * h, 4);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(u)) << "block " << i << " header " << h;
      } else {
        EXPECT_EQ(std::memcmp(x + 4 * h, y + 4 * h, 4), 0)
            << "block " << i << " header " << h << ": " << u << " against " << v;
      }
    }
    ASSERT_EQ(std::memcmp(x + kPackedBlockHeaderBytes, y + kPackedBlockHeaderBytes,
                          block - kPackedBlockHeaderBytes), 0)
        << "codes of block " << i << " (row " << i / layout.groups() << ")";
  }
}

TEST(QuantizedWeight, RowByRowPackingIsTheTensorFormulasBitForBit) {
  for (const PackedLayout layout : {PackedLayout{8, 37, 96, 96}, PackedLayout{8, 19, 96, 32},
                                    PackedLayout{4, 37, 256, 32}, PackedLayout{4, 21, 256, 128}}) {
    SCOPED_TRACE(testing::Message() << layout.bits << " bits, groups of " << layout.group_size);
    at::Tensor w = Weight(layout.out, layout.in, 7);
    // Ties of every kind (the grids come out exact: steps of 1 and 0.5), a group far from zero
    // (codes past 2^22 before the zero point takes them back), zeros of both signs, NaN and
    // infinities, each in a group of its own.
    const int64_t g = layout.group_size;
    auto group = [&](int64_t row) { return w[row].narrow(0, 0, g); };
    group(0).copy_(at::arange(g, at::kFloat).remainder(16) - 7.5f);
    group(1).copy_(at::arange(g, at::kFloat).remainder(32) * 0.5f - 8.25f);
    group(1)[0] = 127.0f;
    group(2).copy_(1000.0f + at::randn({g}) * 1e-4f);
    group(3).fill_(0.0f);
    group(4).fill_(-0.0f);
    group(5)[3] = std::numeric_limits<float>::quiet_NaN();
    group(6)[1] = std::numeric_limits<float>::infinity();
    group(7)[2] = -std::numeric_limits<float>::infinity();
    group(8).fill_(-3.0f);
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
      SCOPED_TRACE(dtype);
      const at::Tensor typed = w.to(dtype);
      ExpectSamePackedBytes(*QuantizeLinearWeight(typed, layout, "w"),
                            QuantizedByTensorFormulas(typed, layout), layout);
    }
    // A transposed view (a Conv1D [in, out] weight as [out, in]): strided rows.
    const at::Tensor transposed = w.t().contiguous().t();
    ASSERT_FALSE(transposed.is_contiguous());
    ExpectSamePackedBytes(*QuantizeLinearWeight(transposed, layout, "w"),
                          QuantizedByTensorFormulas(transposed, layout), layout);
  }
}

TEST(QuantizedWeight, AllZeroGroupsGiveZeros) {
  const PackedLayout layout{4, 2, 64, 32};
  const at::Tensor packed = *QuantizeLinearWeight(at::zeros({2, 64}), layout, "w");
  EXPECT_TRUE(at::equal(DequantizeLinearWeight(packed, at::kFloat), at::zeros({2, 64})));
}

TEST(QuantizedWeight, FlagsAndShapesAreRefusedByName) {
  EXPECT_FALSE(ParseQuantizeOptions("int3", 0).ok());
  EXPECT_NE(ParseQuantizeOptions("int3", 0).status().message().find("--quantize 'int3'"),
            std::string::npos);
  EXPECT_NE(ParseQuantizeOptions("int4", 64).status().message().find("32 or 128"),
            std::string::npos);
  EXPECT_FALSE(ParseQuantizeOptions("none", 32).ok());
  EXPECT_EQ(ParseQuantizeOptions("int4", 0)->group_size, 128);
  EXPECT_EQ(ParseQuantizeOptions("int8", 0)->group_size, 0);
  const QuantizeOptions int4 = *ParseQuantizeOptions("int4", 32);
  absl::StatusOr<PackedLayout> odd = PackedLayoutFor(int4, 8, 48, "model.layers.0.mlp.up_proj.weight");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("model.layers.0.mlp.up_proj.weight"), std::string::npos);
  EXPECT_NE(odd.status().message().find("does not divide"), std::string::npos);
  EXPECT_EQ(PackedLayoutFor(*ParseQuantizeOptions("int8", 0), 8, 48, "w")->group_size, 48);
  absl::StatusOr<at::Tensor> wrong = QuantizeLinearWeight(Weight(4, 8, 1), PackedLayout{8, 8, 4, 4}, "t.weight");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("t.weight"), std::string::npos);
  EXPECT_FALSE(ValidatePackedLayout(PackedLayout{3, 4, 32, 32}, "x").ok());
  EXPECT_FALSE(ValidatePackedLayout(PackedLayout{4, 4, 48, 16}, "x").ok());
}

}  // namespace
}  // namespace placer::loader
