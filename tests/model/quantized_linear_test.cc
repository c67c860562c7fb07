// The packed-weight products on every instruction set this CPU runs, against float64 products
// of the exactly dequantized weight (odd shapes, int8 per channel and in groups with scalar
// tails, int4 in groups of 32 and 128, with and without bias, F32 and BF16 inputs); each row's
// result bit-identical alone and inside any batch; prompt chunks through the dequantized GEMM.
#include "model/quantized_linear.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loader/quantized_weight.h"
#include "model/prompt_chunk_bf16.h"
#include "model/prompt_chunk_linear.h"
#include "model/quantized_unpacked_linear.h"
#include "model/tensor_ops.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using loader::PackedLayout;

at::Tensor Pack(int bits, int64_t out, int64_t in, int64_t group, int seed) {
  const PackedLayout layout{bits, out, in, group};
  absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(SeededRandn({out, in}, seed), layout, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  return *packed;
}

struct Shape {
  int bits;
  int64_t out, in, group;
};

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {8, 1, 1, 1},    {8, 3, 7, 7},      {8, 65, 33, 33},   {8, 130, 100, 100},
      {8, 5, 96, 24},  {8, 17, 257, 257}, {8, 66, 64, 16},   {4, 1, 32, 32},
      {4, 3, 64, 32},  {4, 65, 96, 32},   {4, 130, 256, 128}, {4, 7, 384, 128},
      // Groups of several 128-input quads, and one group per output channel (quads kernel).
      {4, 33, 512, 256}, {4, 18, 384, 384},
  };
  return shapes;
}

void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& packed,
                          const at::Tensor& bias, double relative) {
  const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
  const at::Tensor x64 = x.to(at::kDouble);
  at::Tensor reference = at::matmul(x64, w64.t());
  if (bias.defined()) reference = reference + bias.to(at::kDouble);
  const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
  const at::Tensor error = (y.to(at::kDouble) - reference).abs();
  const at::Tensor allowed = reference.abs() * relative + magnitude * 2e-6;
  ASSERT_TRUE(at::all(error <= allowed).item<bool>())
      << "worst error " << (error - allowed).max().item<double>() << " beyond the tolerance";
}

TEST(QuantizedLinear, EveryRunnableIsaMatchesAFloat64Reference) {
  const std::vector<QuantIsa> isas = RunnableQuantIsas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
  for (QuantIsa isa : isas) {
    SCOPED_TRACE(QuantIsaName(isa));
    int seed = 1;
    for (const Shape& shape : Shapes()) {
      const at::Tensor packed = Pack(shape.bits, shape.out, shape.in, shape.group, ++seed);
      ASSERT_TRUE(loader::IsPackedWeight(packed));
      for (int64_t rows : {1, 2, 5, 9}) {
        for (int bias_kind = 0; bias_kind < 2; ++bias_kind) {
          SCOPED_TRACE(testing::Message() << "bits " << shape.bits << " out " << shape.out
                                          << " in " << shape.in << " group " << shape.group
                                          << " rows " << rows << " bias " << bias_kind);
          const at::Tensor x = SeededRandn({rows, shape.in}, ++seed);
          const at::Tensor bias = bias_kind == 1 ? SeededRandn({shape.out}, ++seed) : at::Tensor();
          ASSERT_TRUE(QuantizedLinearApplies(x, packed, bias));
          const at::Tensor y = QuantizedLinearKernel(x, packed, bias, isa);
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
          ASSERT_EQ(y.scalar_type(), at::kFloat);
          ExpectMatchesFloat64(y, x, packed, bias, 1e-6);
          // BF16 activations: products of the BF16 inputs, one rounding of the result.
          const at::Tensor x16 = x.to(at::kBFloat16);
          const at::Tensor y16 = QuantizedLinearKernel(x16, packed, bias, isa);
          ASSERT_EQ(y16.scalar_type(), at::kBFloat16);
          ExpectMatchesFloat64(y16, x16, packed, bias, std::ldexp(1.0, -8));
        }
      }
    }
  }
}

TEST(QuantizedLinear, ARowIsTheSameAloneAndInAnyBatch) {
  for (QuantIsa isa : RunnableQuantIsas()) {
    for (int bits : {8, 4}) {
      SCOPED_TRACE(testing::Message() << QuantIsaName(isa) << " bits " << bits);
      const at::Tensor packed = Pack(bits, 301, 256, bits == 8 ? 256 : 32, 8);
      const at::Tensor x = SeededRandn({11, 256}, 7);
      const at::Tensor bias = SeededRandn({301}, 9);
      const at::Tensor batched = QuantizedLinearKernel(x, packed, bias, isa);
      for (int64_t r = 0; r < 11; ++r) {
        const at::Tensor alone = QuantizedLinearKernel(x.narrow(0, r, 1), packed, bias, isa);
        EXPECT_TRUE(at::equal(alone[0], batched[r])) << "row " << r;
        const at::Tensor shifted = at::cat({x.narrow(0, (r + 3) % 11, 1), x.narrow(0, r, 1)});
        EXPECT_TRUE(at::equal(QuantizedLinearKernel(shifted, packed, bias, isa)[1], batched[r]))
            << "row " << r << " second of two";
      }
    }
  }
}

TEST(QuantizedLinear, ARowIsTheSameInEveryTileShape) {
  // The kernels tile 1 to 8 rows (AVX-512) or 1 to 3 (AVX2) against 1, 2 or 4 weight rows,
  // with weight-row tails at the end of each task, int8 groups ending in a 16- or 8-lane
  // piece and scalar codes, int4 groups of 32 and 128: every batch size 1-9 gives each row
  // the bits it gets alone.
  // AVX-512 int4 in groups of 128s: 1 to 4 rows per pass, 16 outputs' lanes summed at once at
  // one row (67 outputs: four 16s and a tail in the first task).
  const Shape shapes[] = {{8, 67, 120, 40}, {8, 131, 89, 89}, {4, 67, 256, 128},
                          {4, 69, 96, 32},  {4, 35, 384, 384}};
  for (QuantIsa isa : RunnableQuantIsas()) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(testing::Message() << QuantIsaName(isa) << " bits " << shape.bits << " out "
                                      << shape.out << " in " << shape.in << " group "
                                      << shape.group);
      const at::Tensor packed = Pack(shape.bits, shape.out, shape.in, shape.group, 21);
      const at::Tensor x = SeededRandn({9, shape.in}, 22);
      const at::Tensor bias = SeededRandn({shape.out}, 23);
      std::vector<at::Tensor> alone;
      for (int64_t r = 0; r < 9; ++r) {
        alone.push_back(QuantizedLinearKernel(x.narrow(0, r, 1), packed, bias, isa)[0]);
      }
      for (int64_t batch = 2; batch <= 9; ++batch) {
        const at::Tensor y = QuantizedLinearKernel(x.narrow(0, 0, batch), packed, bias, isa);
        for (int64_t r = 0; r < batch; ++r) {
          EXPECT_TRUE(at::equal(y[r], alone[static_cast<size_t>(r)]))
              << "row " << r << " of " << batch;
        }
      }
      ExpectMatchesFloat64(QuantizedLinearKernel(x, packed, bias, isa), x, packed, bias, 1e-6);
    }
  }
}

TEST(QuantizedLinear, PromptChunksUseTheDequantizedWeightAndMatch) {
  // F32 and BF16 rows both (BF16 dequantizes into a BF16 buffer).
  for (int bits : {8, 4}) {
    const at::Tensor packed = Pack(bits, 70, 128, 32, 3);
    const at::Tensor x = SeededRandn({3, 50, 128}, 4);  // 150 rows: beyond the kernels
    for (at::ScalarType compute : {at::kFloat, at::kBFloat16}) {
      ASSERT_GT(150, QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(packed), compute));
    }
    const at::Tensor y = QuantizedLinear(x, packed, at::Tensor());
    ASSERT_EQ(y.sizes(), (at::IntArrayRef{3, 50, 70}));
    ExpectMatchesFloat64(y.reshape({150, 70}), x.reshape({150, 128}), packed, at::Tensor(), 1e-5);
    // BF16 rows: the weight dequantized into a BF16 buffer (one rounding per weight), BF16 GEMM.
    const at::Tensor x16 = x.reshape({150, 128}).to(at::kBFloat16);
    const at::Tensor y16 = QuantizedLinear(x16, packed, at::Tensor());
    ASSERT_EQ(y16.scalar_type(), at::kBFloat16);
    const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
    const at::Tensor reference = at::matmul(x16.to(at::kDouble), w64.t());
    const at::Tensor magnitude = at::matmul(x16.to(at::kDouble).abs(), w64.abs().t());
    EXPECT_TRUE(at::all((y16.to(at::kDouble) - reference).abs() <= magnitude * std::ldexp(1.0, -7))
                    .item<bool>());
    // A smaller weight afterwards reuses the thread's buffer and is still right.
    const at::Tensor small = Pack(bits, 9, 64, 32, 5);
    const at::Tensor xs = SeededRandn({140, 64}, 6);
    ExpectMatchesFloat64(QuantizedLinear(xs, small, at::Tensor()), xs, small, at::Tensor(), 1e-5);
  }
}

TEST(QuantizedLinear, TheKernelsTakeRowsUpToMaxRowsAndUnpackPlusGemmTheRest) {
  if (DetectQuantIsa() == QuantIsa::kNone) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
  for (auto [bits, group] : {std::pair<int, int64_t>{4, 32}, {4, 128}, {8, 256}}) {
    const at::Tensor packed = Pack(bits, 40, 256, group, 7);
    const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
    for (at::ScalarType compute : {at::kFloat, at::kBFloat16}) {
      const int64_t max_rows = QuantizedLinearMaxRows(DetectQuantIsa(), layout, compute);
      SCOPED_TRACE(testing::Message() << "bits " << bits << " group " << group << " "
                                      << at::toString(compute) << " max rows " << max_rows);
      ASSERT_GE(max_rows, 16);  // a decode step of --max-batch-size 8 (and twice that) stays exact
      const at::Tensor at_limit = SeededRandn({max_rows, 256}, 8).to(compute);
      // BF16 rows go to the vdpbf16ps kernels where they run, rows of 4-bit groups of 128s
      // to the three-digit kernel where it takes them, others to the ISA's.
      const at::Tensor kernels =
          UsesInt4Bf16Kernel(at_limit, packed, at::Tensor())
              ? QuantizedLinearInt4Bf16(at_limit, packed, at::Tensor())
          : UsesInt8Bf16Kernel(at_limit, packed, at::Tensor())
              ? QuantizedLinearInt8Bf16(at_limit, packed, at::Tensor())
          : UsesInt4DigitsKernel(at_limit, packed, at::Tensor())
              ? QuantizedLinearInt4Digits(at_limit, packed, at::Tensor())
              : QuantizedLinearKernel(at_limit, packed, at::Tensor(), DetectQuantIsa());
      EXPECT_TRUE(at::equal(QuantizedLinear(at_limit, packed, at::Tensor()), kernels));
      // Past the limit: F32 chunks of groups of 128s to the AMX-INT8 digits where they run, F32
      // chunks of groups of 64s and BF16 chunks to the AMX BF16 kernel where it runs, else F32
      // chunks of groups of 128s to the three-digit chunk kernel where it runs, the rest
      // unpacked for the compute dtype's dense product; on AVX2 alone BF16 chunks are widened
      // and multiplied by the float32 weight, as F32 ones (rounded to BF16 once).
      const at::Tensor beyond = SeededRandn({max_rows + 1, 256}, 9).to(compute);
      const bool widened = DetectQuantIsa() == QuantIsa::kAvx2 && compute == at::kBFloat16;
      const at::Tensor dense = loader::DequantizeLinearWeight(packed, widened ? at::kFloat : compute);
      EXPECT_TRUE(at::equal(QuantizedLinear(beyond, packed, at::Tensor()),
                            UsesDigitTilesKernel(beyond, packed, at::Tensor())
                                ? QuantizedLinearDigitTiles(beyond, packed, at::Tensor())
                            : UsesQuantizedTilesKernel(beyond, packed, at::Tensor()) &&
                                    (compute == at::kBFloat16 || group >= 64)
                                ? QuantizedLinearTiles(beyond, packed, at::Tensor())
                            : UsesInt4DigitChunksKernel(beyond, packed, at::Tensor())
                                ? QuantizedLinearInt4DigitChunks(beyond, packed, at::Tensor())
                            : widened ? Linear(beyond.to(at::kFloat), dense).to(compute)
                                      : Linear(beyond, dense)));
    }
  }
}

TEST(QuantizedLinear, F32PromptChunksUnpackEachTasksRowsIntoTheSameProducts) {
  // UnpackedQuantizedLinear (what QuantizedLinear gives the F32 chunks the three-digit chunk
  // kernel does not take), where PromptChunkLinear takes them (AVX-512, or AVX2 alone with its
  // own unpacking), unpacks a task's rows at a time:
  // the result is bit for bit the whole weight unpacked and multiplied, with tasks (48 rows) and
  // blocks of inputs (64) left partial, with a bias, and with chunks of several blocks.
  if (DetectQuantIsa() == QuantIsa::kNone || !PromptChunkLinearTakes(33)) {
    GTEST_SKIP() << "the prompt-chunk kernel does not take 33-row F32 chunks here";
  }
  for (auto [bits, group] : {std::pair<int, int64_t>{4, 128}, {8, 256}, {4, 32}}) {
    const at::Tensor packed = Pack(bits, 100, 256, group, 21);
    const at::Tensor dense = loader::DequantizeLinearWeight(packed, at::kFloat);
    const at::Tensor bias = SeededRandn({100}, 22);
    for (int64_t rows : {33, 64, 100, 128}) {
      const at::Tensor x = SeededRandn({rows, 256}, 23);
      EXPECT_TRUE(at::equal(UnpackedQuantizedLinear(x, packed, bias), PromptChunkLinear(x, dense, bias)))
          << "bits " << bits << " group " << group << " rows " << rows;
    }
  }
}

TEST(QuantizedLinear, Bf16PromptChunksUnpackEachTasksRowsIntoTheSameProducts) {
  // The BF16 prompt-chunk kernel over a packed weight: bit for bit the kernel over the whole
  // weight unpacked to BF16, with partial tasks and blocks, a bias, several blocks; and what
  // QuantizedLinear gives BF16 rows past the packed kernels' limit.
  if (DetectQuantIsa() != QuantIsa::kAvx512 || !PromptChunkBf16Runs()) {
    GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  }
  for (auto [bits, group] : {std::pair<int, int64_t>{4, 128}, {8, 256}, {4, 32}}) {
    const at::Tensor packed = Pack(bits, 100, 256, group, 31);
    const at::Tensor dense = loader::DequantizeLinearWeight(packed, at::kBFloat16);
    const at::Tensor bias = SeededRandn({100}, 32).to(at::kBFloat16);
    const int64_t max_rows =
        QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(packed), at::kBFloat16);
    for (int64_t rows : {9, 33, 64, 100, 128}) {
      const at::Tensor x = SeededRandn({rows, 256}, 33).to(at::kBFloat16);
      const at::Tensor want = PromptChunkLinearBf16(x, dense, bias);
      EXPECT_TRUE(at::equal(QuantizedPromptChunkBf16(x, packed, bias), want))
          << "bits " << bits << " group " << group << " rows " << rows;
      if (rows > max_rows && PromptChunkBf16Takes(rows)) {
        EXPECT_TRUE(at::equal(QuantizedLinear(x, packed, bias), want)) << "through QuantizedLinear, rows " << rows;
      }
    }
  }
}

TEST(QuantizedLinear, OnlyPackedWeightsAndMatchingInputsApply) {
  const at::Tensor packed = Pack(4, 8, 64, 32, 1);
  EXPECT_TRUE(QuantizedLinearApplies(SeededRandn({2, 64}, 2), packed, at::Tensor()));
  EXPECT_FALSE(QuantizedLinearApplies(SeededRandn({2, 63}, 2), packed, at::Tensor()));
  EXPECT_FALSE(QuantizedLinearApplies(SeededRandn({2, 64}, 2), SeededRandn({8, 64}, 3), at::Tensor()));
  EXPECT_FALSE(QuantizedLinearApplies(SeededRandn({2, 64}, 2), packed, SeededRandn({9}, 3)));
  EXPECT_FALSE(QuantizedLinearApplies(SeededRandn({2, 64}, 2).to(at::kDouble), packed, at::Tensor()));
}

}  // namespace
}  // namespace placer::model
