// WidenedBf16Linear: BF16 operands widened to float32 for sgemm, a slice of output rows at a
// time; runs (and is tested) on every CPU, though Linear gives it chunks only on AVX2 alone.
#include "model/widened_bf16_linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "model/prompt_chunk_linear.h"
#include "tests/model/bf16_layout_checks.h"

namespace placer::model {
namespace {

using bf16_layout_checks::ExpectMatchesFloat64;
using bf16_layout_checks::RandomBf16;

TEST(WidenedBf16Linear, EverySliceOfOutputsGetsItsOwnWeightsAndBias) {
  // Past the F32 prompt-chunk kernel's rows (sgemm, a slice at a time).
  const at::Tensor x = RandomBf16({200, 96}, 31);
  ASSERT_FALSE(PromptChunkLinearTakes(200));
  const at::Tensor w = RandomBf16({130, 96}, 32);
  // A BF16 bias, a float32 one and none; one slice, slices of 7 output rows (the last of 4) and
  // of one row.
  for (const at::Tensor& bias : {RandomBf16({130}, 33), at::randn({130}), at::Tensor()}) {
    for (int64_t slice_elements : {int64_t{2} << 20, int64_t{7 * 96}, int64_t{96}}) {
      const at::Tensor y = WidenedBf16Linear(x, w, bias, slice_elements);
      ExpectMatchesFloat64(y, x, w, bias);
    }
  }
}

TEST(WidenedBf16Linear, ChunksOfThePromptChunkKernelWidenEachTasksRows) {
  // Rows the F32 prompt-chunk kernel takes where it runs (with AVX2: 17-192); weights of one
  // task's 48 rows, of several and a partial one; a BF16 bias, a float32 one and none. The
  // products are the kernel's over the whole weight widened.
  for (int64_t rows : {17, 70, 192}) {
    const at::Tensor x = RandomBf16({rows, 96}, 51);
    for (int64_t out : {48, 130}) {
      const at::Tensor w = RandomBf16({out, 96}, 52);
      for (const at::Tensor& bias : {RandomBf16({out}, 53), at::randn({out}), at::Tensor()}) {
        const at::Tensor y = WidenedBf16Linear(x, w, bias);
        ExpectMatchesFloat64(y, x, w, bias);
        if (PromptChunkLinearTakes(rows)) {
          const at::Tensor dense = PromptChunkLinear(x.to(at::kFloat), w.to(at::kFloat),
                                                     bias.defined() ? bias.to(at::kFloat) : at::Tensor());
          EXPECT_TRUE(at::equal(y, dense.to(at::kBFloat16))) << rows << " rows, " << out << " outputs";
        }
      }
    }
  }
}

TEST(WidenedBf16Linear, KeepsTheInputsLeadingDimensions) {
  const at::Tensor x = RandomBf16({2, 35, 96}, 41);
  const at::Tensor w = RandomBf16({50, 96}, 42);
  const at::Tensor y = WidenedBf16Linear(x, w, at::Tensor(), 96 * 8);
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{2, 35, 50}));
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  ExpectMatchesFloat64(y.view({70, 50}), x.view({70, 96}), w, at::Tensor());
}

}  // namespace
}  // namespace placer::model
