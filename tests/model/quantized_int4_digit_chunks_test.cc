// The prompt-chunk three-digit kernel (the chunk's rows in vpdpbusd's lanes, the decode kernel's
// digits) against float64 products of the exactly dequantized weight, within the bound
// quantized_int4_digits.h states: groups of 128, 256 and one per output row, outputs in tiles
// of 8 and a tail of single ones, 1-100 rows (passes of 3, 2 and 1 row vectors of 16, the last
// one part padding), bias or none; each row bit-identical alone, in any chunk and at either
// thread count; outliers, tiny blocks and non-finite inputs; QuantizedLinear sending float32
// prompt chunks of 4-bit weights in groups of 128s here where neither the AMX kernel nor the F32
// prompt-chunk kernel takes them, and nothing else.
#include "model/quantized_int4_digit_chunks.h"

#include <gtest/gtest.h>

#include <limits>

#include "loader/quantized_weight.h"
#include "model/prompt_chunk_linear.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_linear.h"
#include "model/quantized_unpacked_linear.h"
#include "tests/model/int4_digit_checks.h"
#include "tests/model/chunk_invariance_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using int4_digit_checks::ExpectWithinTheBound;
using int4_digit_checks::Pack;

class Int4DigitChunks : public testing::Test {
 protected:
  void SetUp() override {
    if (!DigitsVnniRuns()) GTEST_SKIP() << "this CPU lacks AVX512-VNNI";
  }
};

TEST_F(Int4DigitChunks, ProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  // 8 outputs (one tile), 3 (only single ones), 67 and 130 (tiles and a tail), groups of one
  // block, two blocks and whole rows.
  const Shape shapes[] = {{8, 128, 128}, {3, 256, 128}, {67, 384, 384}, {130, 768, 128},
                          {17, 2048, 256}, {40, 512, 512}};
  int seed = 100;
  for (const Shape& shape : shapes) {
    const at::Tensor packed = Pack(shape.out, shape.in, shape.group, ++seed);
    // Row vectors: 1 (part padding), 2, 3, 4 (a pass of 3 and one of 1), 5, 7 (3 + 3 + 1).
    for (int64_t rows : {1, 16, 17, 33, 48, 64, 65, 100}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << "out " << shape.out << " in " << shape.in << " group "
                                        << shape.group << " rows " << rows << " bias " << with_bias);
        const at::Tensor x = SeededRandn({rows, shape.in}, ++seed);
        const at::Tensor bias = with_bias ? SeededRandn({shape.out}, ++seed) : at::Tensor();
        const at::Tensor y = QuantizedLinearInt4DigitChunks(x, packed, bias);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
        ASSERT_EQ(y.scalar_type(), at::kFloat);
        ExpectWithinTheBound(y, x, packed, bias);
      }
    }
  }
}

TEST_F(Int4DigitChunks, ARowIsTheSameAloneInAnyChunkAndAtEitherThreadCount) {
  // 67 outputs: eight tiles and three single ones, split over two threads' tasks.
  const at::Tensor packed = Pack(67, 512, 128, 21);
  const at::Tensor bias = SeededRandn({67}, 22);
  ExpectEachRowTheSameAloneInAnyChunkAndAtEitherThreadCount(
      [&](const at::Tensor& rows) { return QuantizedLinearInt4DigitChunks(rows, packed, bias); },
      SeededRandn({70, 512}, 23));
}

TEST_F(Int4DigitChunks, OutliersAndTinyBlocksStayWithinTheBound) {
  // Rows with an input 1000 times the others, a block around 1e-30 and an all-zero block, at
  // lanes of different row vectors.
  const at::Tensor packed = Pack(40, 512, 128, 5);
  at::Tensor x = SeededRandn({40, 512}, 6);
  x.index_put_({0, 7}, 1000.0f);
  x.index_put_({21, 300}, -2500.0f);
  x.narrow(1, 128, 128).mul_(1e-30);
  x.narrow(1, 384, 128).zero_();
  const at::Tensor y = QuantizedLinearInt4DigitChunks(x, packed, at::Tensor());
  ExpectWithinTheBound(y, x, packed, at::Tensor());
  EXPECT_TRUE(at::all(at::isfinite(y)).item<bool>());
}

TEST_F(Int4DigitChunks, ANonFiniteInputMakesOnlyItsRowNan) {
  const at::Tensor packed = Pack(20, 256, 128, 31);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    at::Tensor x = SeededRandn({33, 256}, 32);
    x.index_put_({17, 140}, bad);
    const at::Tensor y = QuantizedLinearInt4DigitChunks(x, packed, at::Tensor());
    EXPECT_TRUE(at::all(at::isnan(y[17])).item<bool>()) << bad;
    const at::Tensor others = at::cat({y.narrow(0, 0, 17), y.narrow(0, 18, 15)});
    EXPECT_TRUE(at::all(at::isfinite(others)).item<bool>()) << bad;
  }
}

TEST_F(Int4DigitChunks, QuantizedLinearSendsFloat32PromptChunksOfGroupsOf128sHere) {
  const at::Tensor packed = Pack(48, 256, 128, 41);
  const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
  const int64_t most = QuantizedLinearMaxRows(DetectQuantIsa(), layout, at::kFloat);
  for (int64_t rows : {most + 1, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{129}}) {
    const at::Tensor x = SeededRandn({rows, 256}, 42);
    // On AMX-INT8 CPUs every such chunk goes to the digit tiles (digit_tiles_test.cc), on
    // other AMX CPUs to the BF16 tiles (quantized_tiles_test.cc); elsewhere chunks the F32
    // prompt-chunk kernel takes go there, their weight rows unpacked.
    const at::Tensor expected = UsesDigitTilesKernel(x, packed, at::Tensor())
                                    ? QuantizedLinearDigitTiles(x, packed, at::Tensor())
                                : UsesQuantizedTilesKernel(x, packed, at::Tensor())
                                    ? QuantizedLinearTiles(x, packed, at::Tensor())
                                : PromptChunkLinearTakes(rows)
                                    ? UnpackedQuantizedLinear(x, packed, at::Tensor())
                                    : QuantizedLinearInt4DigitChunks(x, packed, at::Tensor());
    EXPECT_TRUE(at::equal(QuantizedLinear(x, packed, at::Tensor()), expected)) << rows << " rows";
    // Not the decode kernel's summing order: some output differs in its last bits.
    EXPECT_FALSE(at::equal(QuantizedLinearInt4Digits(x, packed, at::Tensor()),
                           QuantizedLinearInt4DigitChunks(x, packed, at::Tensor())));
  }
  // Decode rows stay with the decode kernel.
  const at::Tensor few = SeededRandn({most, 256}, 43);
  EXPECT_TRUE(at::equal(QuantizedLinear(few, packed, at::Tensor()),
                        QuantizedLinearInt4Digits(few, packed, at::Tensor())));
  // BF16 rows, groups of 32, 8-bit weights: not this kernel (its entry refuses them).
  const at::Tensor chunk = SeededRandn({64, 256}, 44);
  EXPECT_THROW(QuantizedLinearInt4DigitChunks(chunk.to(at::kBFloat16), packed, at::Tensor()),
               c10::Error);
  EXPECT_THROW(QuantizedLinearInt4DigitChunks(chunk, Pack(48, 256, 32, 45), at::Tensor()), c10::Error);
  absl::StatusOr<at::Tensor> int8 = loader::QuantizeLinearWeight(
      SeededRandn({48, 256}, 46), loader::PackedLayout{8, 48, 256, 128}, "w");
  ASSERT_TRUE(int8.ok());
  EXPECT_THROW(QuantizedLinearInt4DigitChunks(chunk, *int8, at::Tensor()), c10::Error);
}

}  // namespace
}  // namespace placer::model
