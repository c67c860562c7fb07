// The BF16 few-row kernels on every instruction set this CPU runs: against a float64 sum of
// the same BF16 products (odd sizes, tails, with and without bias), and each row's result
// bit-identical alone and inside any batch.
#include "model/small_batch_bf16.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "model/tensor_ops.h"
#include "model/widened_bf16_linear.h"
#include "tests/model/bf16_layout_checks.h"

namespace placer::model {
namespace {

using bf16_layout_checks::RandomBf16;

TEST(SmallBatchBf16, EveryRunnableIsaMatchesAFloat64Reference) {
  const std::vector<Bf16Isa> isas = RunnableBf16Isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512: no BF16 kernels";
  for (Bf16Isa isa : isas) {
    SCOPED_TRACE(Bf16IsaName(isa));
    int seed = 1;
    for (int64_t in : {1, 7, 31, 32, 33, 100, 257}) {
      for (int64_t out : {1, 3, 65, 130}) {
        for (int64_t rows : {1, 2, 5, 9}) {
          for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
            const at::Tensor x = RandomBf16({rows, in}, ++seed);
            const at::Tensor w = RandomBf16({out, in}, ++seed);
            at::Tensor bias;
            if (bias_kind == 1) bias = RandomBf16({out}, ++seed);
            if (bias_kind == 2) bias = at::randn({out});
            ASSERT_TRUE(SmallBatchBf16Applies(x, w, bias));
            SCOPED_TRACE(testing::Message() << "in " << in << " out " << out << " rows " << rows
                                            << " bias " << bias_kind);
            bf16_layout_checks::ExpectMatchesFloat64(SmallBatchLinearBf16(x, w, bias, isa), x, w,
                                                     bias);
          }
        }
      }
    }
  }
}

TEST(SmallBatchBf16, ARowIsTheSameAloneAndInAnyBatch) {
  // 11 rows: a chunk of 8 and a tail of 3; inputs with
  // and without a scalar tail; with and without a bias.
  for (Bf16Isa isa : RunnableBf16Isas()) {
    for (int64_t in : {200, 256}) {
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(testing::Message() << Bf16IsaName(isa) << " in " << in << " bias " << with_bias);
        const at::Tensor x = RandomBf16({11, in}, 7);
        const at::Tensor w = RandomBf16({301, in}, 8);
        const at::Tensor bias = with_bias ? RandomBf16({301}, 9) : at::Tensor();
        const at::Tensor batched = SmallBatchLinearBf16(x, w, bias, isa);
        for (int64_t r = 0; r < 11; ++r) {
          const at::Tensor alone = SmallBatchLinearBf16(x.narrow(0, r, 1), w, bias, isa);
          EXPECT_TRUE(at::equal(alone[0], batched[r])) << "row " << r;
          // And at another position, among other rows.
          const at::Tensor shifted = at::cat({x.narrow(0, (r + 3) % 11, 1), x.narrow(0, r, 1)});
          EXPECT_TRUE(at::equal(SmallBatchLinearBf16(shifted, w, bias, isa)[1], batched[r])) << r;
        }
        // Every batch size: 1, 2, 4 and 8 rows sum 16, 8, 4 or 2 outputs' lanes at once (the
        // 64-output tasks and the last task's 45 outputs end in tails), other sizes one by one.
        for (int64_t batch = 2; batch <= 9; ++batch) {
          const at::Tensor y = SmallBatchLinearBf16(x.narrow(0, 0, batch), w, bias, isa);
          EXPECT_TRUE(at::equal(y, batched.narrow(0, 0, batch))) << "batch of " << batch;
        }
      }
    }
  }
}

// With AVX2 alone (no AVX-512) ATen's BF16 GEMM is a scalar loop (4.4 s for a 64-row pass of the
// small preset's layers, where the kernel takes 0.14): Linear never hands it BF16 rows. Decode
// steps' rows stay on the kernel (a row's bits the same alone and in the step); longer chunks go
// to float32 sgemm (WidenedBf16Linear).
TEST(SmallBatchBf16, OnAvx2AloneLinearKeepsDecodeRowsOnTheKernelAndWidensLongerChunks) {
  if (DetectBf16Isa() != Bf16Isa::kAvx2) GTEST_SKIP() << "this CPU runs AVX-512 (ATen's BF16 GEMM has its path)";
  const int64_t few = SmallBatchBf16MaxRows(Bf16Isa::kAvx2);
  ASSERT_GE(few, 16);  // continuous batching's decode steps
  EXPECT_FALSE(WidenedBf16LinearTakes(few));
  EXPECT_TRUE(WidenedBf16LinearTakes(few + 1));
  const at::Tensor w = RandomBf16({130, 96}, 22);
  const at::Tensor bias = RandomBf16({130}, 23);
  const at::Tensor step = RandomBf16({few, 96}, 24);
  const at::Tensor step_y = Linear(step, w, bias);
  EXPECT_TRUE(at::equal(step_y, SmallBatchLinearBf16(step, w, bias, Bf16Isa::kAvx2)));
  for (int64_t r = 0; r < few; r += 5) {
    EXPECT_TRUE(at::equal(Linear(step.narrow(0, r, 1), w, bias)[0], step_y[r])) << "row " << r;
  }
  const at::Tensor x = RandomBf16({70, 96}, 21);
  const at::Tensor chunk = Linear(x, w, bias);
  EXPECT_TRUE(at::equal(chunk, WidenedBf16Linear(x, w, bias)));
  bf16_layout_checks::ExpectMatchesFloat64(chunk, x, w, bias);
}

TEST(SmallBatchBf16, SeveralWeightsOfOneInputGiveEachWeightsOwnProductBitForBit) {
  const int saved_threads = at::get_num_threads();
  // Heights below, at and past a task's 64 outputs and none; BF16 and float32 biases and none;
  // an odd input width; one and two threads (a chunk of tasks running into the next weight).
  const auto bf16 = [](std::vector<int64_t> shape) { return at::randn(shape).to(at::kBFloat16); };
  for (Bf16Isa isa : RunnableBf16Isas()) {
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      for (int64_t rows : {1, 5}) {
        const at::Tensor x = bf16({rows, 75});
        const std::vector<at::Tensor> weights = {bf16({7, 75}), bf16({64, 75}), bf16({150, 75}),
                                                 bf16({0, 75}), bf16({65, 75})};
        const std::vector<at::Tensor> biases = {bf16({7}), at::Tensor(), at::randn({150}),
                                                at::Tensor(), bf16({65})};
        const std::vector<at::Tensor> ys = SmallBatchLinearsBf16(x, weights, biases, isa);
        ASSERT_EQ(ys.size(), weights.size());
        for (size_t i = 0; i < weights.size(); ++i) {
          EXPECT_TRUE(at::equal(ys[i], SmallBatchLinearBf16(x, weights[i], biases[i], isa)))
              << Bf16IsaName(isa) << ", weight " << i << ", " << rows << " rows, " << threads << " threads";
        }
      }
    }
  }
  at::set_num_threads(saved_threads);
}

TEST(SmallBatchBf16, OnlyBf16CpuOperandsApply) {
  const at::Tensor x = RandomBf16({2, 16}, 1);
  const at::Tensor w = RandomBf16({4, 16}, 2);
  EXPECT_TRUE(SmallBatchBf16Applies(x, w, at::Tensor()));
  EXPECT_FALSE(SmallBatchBf16Applies(x.to(at::kFloat), w, at::Tensor()));
  EXPECT_FALSE(SmallBatchBf16Applies(x, w.to(at::kFloat), at::Tensor()));
  EXPECT_FALSE(SmallBatchBf16Applies(x, w.t(), at::Tensor()));  // not [out, in] contiguous
  EXPECT_FALSE(SmallBatchBf16Applies(x, w, RandomBf16({5}, 3)));
}

}  // namespace
}  // namespace placer::model
