// Unpacking a packed weight for a prompt chunk's GEMM (model/quantized_unpack.h), on every
// instruction set this CPU runs and the scalar one: the loader's dequantized weight bit for
// bit, float32 and BF16, on odd shapes with scalar tails, and on BF16 rounding's edges (ties
// either way, denormals, NaN), which a vector conversion instruction would get wrong.
#include "model/quantized_unpack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loader/quantized_weight.h"
#include "model/quantized_linear.h"
#include "model/quantized_unpacked_linear.h"

namespace placer::model {
namespace {

using loader::PackedLayout;

std::vector<QuantIsa> EveryIsa() {
  std::vector<QuantIsa> isas = RunnableQuantIsas();
  isas.push_back(QuantIsa::kNone);
  return isas;
}

// The same bits, NaNs included (at::equal would call NaN unequal to itself).
void ExpectSameBits(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.scalar_type(), want.scalar_type());
  const at::ScalarType bits = got.element_size() == 2 ? at::kShort : at::kInt;
  const at::Tensor differ = got.contiguous().view(bits).ne(want.contiguous().view(bits));
  ASSERT_FALSE(differ.any().item<bool>())
      << differ.sum().item<int64_t>() << " of " << got.numel() << " elements differ; first at flat index "
      << differ.reshape({-1}).nonzero()[0].item<int64_t>();
}

TEST(QuantizedUnpack, EveryIsaGivesTheLoadersWeightBitForBit) {
  struct Shape {
    int bits;
    int64_t out, in, group;
  };
  const std::vector<Shape> shapes = {{8, 1, 1, 1},     {8, 3, 7, 7},     {8, 65, 33, 33},
                                     {8, 130, 100, 100}, {8, 5, 96, 24}, {8, 17, 257, 257},
                                     {8, 66, 64, 16},  {4, 1, 32, 32},   {4, 65, 96, 32},
                                     {4, 130, 256, 128}, {4, 7, 384, 128}};
  int seed = 10;
  for (const Shape& shape : shapes) {
    at::manual_seed(++seed);
    const PackedLayout layout{shape.bits, shape.out, shape.in, shape.group};
    const absl::StatusOr<at::Tensor> packed =
        loader::QuantizeLinearWeight(at::randn({shape.out, shape.in}), layout, "w");
    ASSERT_TRUE(packed.ok()) << packed.status();
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor want = loader::DequantizeLinearWeight(*packed, dtype);
      for (QuantIsa isa : EveryIsa()) {
        SCOPED_TRACE(testing::Message() << QuantIsaName(isa) << " " << at::toString(dtype) << " bits "
                                        << shape.bits << " out " << shape.out << " in " << shape.in
                                        << " group " << shape.group);
        at::Tensor scratch;
        UnpackQuantizedWeight(*packed, dtype, isa, scratch);
        ExpectSameBits(scratch, want);
      }
    }
  }
}

TEST(QuantizedUnpack, RoundsToBf16AsC10DoesOnTiesDenormalsAndNaN) {
  // Four outputs of 32 inputs, int4: every weight of a row is fma(q, s, m).
  //   row 0: s = 0, m = 1 + 2^-8: the float's low 16 bits are 0x8000 exactly, a tie whose
  //          17th bit is 0: stays at 1.0 (0x3F80);
  //   row 1: s = 0, m = 1 + 3 * 2^-8: a tie with the 17th bit 1: rounds up to 0x3F82;
  //   row 2: s = 1e-40 (a float32 denormal), m = 0: denormal weights, which c10 rounds on the
  //          bits and a flush-to-zero conversion would zero;
  //   row 3: s = NaN: every weight NaN, c10's 0x7FC0.
  const PackedLayout layout{4, 4, 32, 32};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor scales = at::tensor({0.0f, 0.0f, 1e-40f, nan}).view({4, 1});
  const at::Tensor offsets =
      at::tensor({1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), 0.0f, 0.0f}).view({4, 1});
  const at::Tensor codes = at::arange(32, at::kInt).remainder(16).repeat({4, 1});
  const at::Tensor packed = loader::PackLinearWeight(codes, scales, offsets, layout);
  const at::Tensor want = loader::DequantizeLinearWeight(packed, at::kBFloat16);
  const at::Tensor want_bits = want.view(at::kShort).to(at::kInt).bitwise_and(0xFFFF);
  ASSERT_TRUE(want_bits[0].eq(0x3F80).all().item<bool>());
  ASSERT_TRUE(want_bits[1].eq(0x3F82).all().item<bool>());
  ASSERT_TRUE(want_bits[2].narrow(0, 1, 15).ne(0).all().item<bool>());  // q = 1..15: denormal, not zero
  ASSERT_TRUE(want_bits[3].eq(0x7FC0).all().item<bool>());
  for (QuantIsa isa : EveryIsa()) {
    SCOPED_TRACE(QuantIsaName(isa));
    at::Tensor scratch;
    UnpackQuantizedWeight(packed, at::kBFloat16, isa, scratch);
    ExpectSameBits(scratch, want);
  }
}

TEST(QuantizedUnpack, TheScratchBufferIsReusedAcrossWeightsAndDtypes) {
  at::manual_seed(3);
  const at::Tensor big = *loader::QuantizeLinearWeight(at::randn({96, 256}), PackedLayout{4, 96, 256, 32}, "big");
  const at::Tensor small = *loader::QuantizeLinearWeight(at::randn({9, 64}), PackedLayout{8, 9, 64, 64}, "small");
  const QuantIsa isa = DetectQuantIsa();
  at::Tensor scratch;
  UnpackQuantizedWeight(big, at::kBFloat16, isa, scratch);
  const void* storage = scratch.data_ptr();
  UnpackQuantizedWeight(small, at::kBFloat16, isa, scratch);
  EXPECT_EQ(scratch.data_ptr(), storage);  // shrunk in place, not reallocated
  ExpectSameBits(scratch, loader::DequantizeLinearWeight(small, at::kBFloat16));
  UnpackQuantizedWeight(big, at::kFloat, isa, scratch);
  ExpectSameBits(scratch, loader::DequantizeLinearWeight(big, at::kFloat));
}

}  // namespace
}  // namespace placer::model
