// The few-row kernels behind Linear (weights [out, in]) and GPT-2's Conv1D ([in, out]): same
// products as a float64 reference (tails of every size, bias or not), and a row's result bit
// for bit the same alone, inside any batch, at any position and with any thread count (what
// keeps greedy output batch-invariant).
#include "model/small_batch_linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

#include "base/openblas_core.h"
#include "model/causal_lm.h"
#include "model/tensor_ops.h"
#include "tests/model/linear_reference.h"

namespace placer::model {
namespace {

bool Runs(VectorIsa isa) {
  const VectorIsa here = DetectVectorIsa();
  return isa == here || (isa == VectorIsa::kAvx2 && here == VectorIsa::kAvx512);
}

std::string IsaName(VectorIsa isa) { return isa == VectorIsa::kAvx512 ? "Avx512" : "Avx2"; }

class SmallBatchLinearTest
    : public ::testing::TestWithParam<std::tuple<VectorIsa, WeightLayout>> {
 protected:
  void SetUp() override {
    if (!Runs(isa())) GTEST_SKIP() << "this CPU lacks " << IsaName(isa());
    at::manual_seed(11);
  }
  VectorIsa isa() const { return std::get<0>(GetParam()); }
  WeightLayout layout() const { return std::get<1>(GetParam()); }
  // A weight of `out` x `in` in this test's layout, and the same as [out, in].
  std::pair<at::Tensor, at::Tensor> Weight(int64_t out, int64_t in) const {
    if (layout() == WeightLayout::kOutIn) {
      at::Tensor w = at::randn({out, in});
      return {w, w};
    }
    at::Tensor w = at::randn({in, out});
    return {w, w.t()};
  }
  at::Tensor Apply(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
    return SmallBatchLinear(x, w, b, isa(), layout());
  }
};

TEST_P(SmallBatchLinearTest, MatchesFloat64ForEveryTailAndBias) {
  for (int64_t in : {1, 5, 8, 15, 16, 17, 40, 768}) {
    for (int64_t out : {1, 2, 3, 65, 130}) {
      for (int64_t rows : {1, 3, 4, 5, 8, 9, 17, 33}) {
        for (bool with_bias : {false, true}) {
          const at::Tensor x = at::randn({rows, in});
          const auto [w, w_out_in] = Weight(out, in);
          const at::Tensor b = with_bias ? at::randn({out}) : at::Tensor();
          const at::Tensor y = Apply(x, w, b);
          const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                                   " out " + std::to_string(out) + (with_bias ? " bias" : "");
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out})) << what;
          ExpectMatchesFloat64(y, x, w_out_in, b, what);
        }
      }
    }
  }
}

TEST_P(SmallBatchLinearTest, ARowIsTheSameAloneInAnyBatchAndWithAnyThreads) {
  const at::Tensor x = at::randn({13, 200});
  const at::Tensor w = Weight(301, 200).first;
  const at::Tensor b = at::randn({301});
  const at::Tensor batch = Apply(x, w, b);
  const at::Tensor order = at::randperm(13);
  const at::Tensor shuffled = Apply(x.index_select(0, order), w, b);
  for (int64_t r = 0; r < 13; ++r) {
    const at::Tensor alone = Apply(x.slice(0, r, r + 1), w, b);
    EXPECT_TRUE(at::equal(alone[0], batch[r])) << "row " << r << " alone vs in the batch";
  }
  for (int64_t i = 0; i < 13; ++i) {
    EXPECT_TRUE(at::equal(shuffled[i], batch[order[i].item<int64_t>()])) << "shuffled " << i;
  }
  // Every batch size: tiles of 3 weight rows from 3 input rows sum their lanes 16 outputs at a
  // time, 1-2 rows one output at a time.
  for (int64_t rows = 2; rows <= 9; ++rows) {
    EXPECT_TRUE(at::equal(Apply(x.slice(0, 0, rows), w, b), batch.slice(0, 0, rows)))
        << "batch of " << rows;
  }
  const int threads = at::get_num_threads();
  at::set_num_threads(threads == 1 ? 2 : 1);
  const at::Tensor other_threads = Apply(x, w, b);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(other_threads, batch));
}

TEST_P(SmallBatchLinearTest, KeepsTheLeadingShapeAndTakesStridedInput) {
  const auto [w, w_out_in] = Weight(24, 16);
  const at::Tensor x = at::randn({2, 3, 16});
  const at::Tensor y = Apply(x, w, {});
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{2, 3, 24}));
  ExpectMatchesFloat64(y.view({6, 24}), x.view({6, 16}), w_out_in, {}, "leading shape");
  const at::Tensor strided = at::randn({16, 5}).t();  // [5, 16], not contiguous
  ASSERT_FALSE(strided.is_contiguous());
  ExpectMatchesFloat64(Apply(strided, w, {}), strided, w_out_in, {}, "strided");
}

TEST_P(SmallBatchLinearTest, SeveralWeightsOfOneInputGiveEachWeightsOwnProductBitForBit) {
  const int saved_threads = at::get_num_threads();
  // Heights below, at and past a task's 64 outputs and none, biases on some, with one and two
  // threads: a chunk of tasks that runs from one weight into the next.
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int64_t rows : {1, 3, 8}) {
      const at::Tensor x = at::randn({rows, 72});
      std::vector<at::Tensor> weights;
      for (int64_t out : {7, 64, 150, 0, 65}) weights.push_back(Weight(out, 72).first);
      const std::vector<at::Tensor> biases = {at::randn({7}), at::Tensor(), at::randn({150}),
                                              at::Tensor(), at::randn({65})};
      const std::vector<at::Tensor> ys = SmallBatchLinears(x, weights, biases, isa(), layout());
      ASSERT_EQ(ys.size(), weights.size());
      for (size_t i = 0; i < weights.size(); ++i) {
        EXPECT_TRUE(at::equal(ys[i], Apply(x, weights[i], biases[i])))
            << "weight " << i << ", " << rows << " rows, " << threads << " threads";
      }
    }
  }
  at::set_num_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(
    IsaAndLayout, SmallBatchLinearTest,
    ::testing::Combine(::testing::Values(VectorIsa::kAvx2, VectorIsa::kAvx512),
                       ::testing::Values(WeightLayout::kOutIn, WeightLayout::kInOut)),
    [](const auto& info) {
      return IsaName(std::get<0>(info.param)) +
             (std::get<1>(info.param) == WeightLayout::kOutIn ? "OutIn" : "InOut");
    });

TEST(SmallBatchLinearApplies, OnlyFloat32CpuWithContiguousWeightAndMatchingBias) {
  const at::Tensor x = at::randn({2, 8});
  const at::Tensor w = at::randn({4, 8});
  EXPECT_TRUE(SmallBatchLinearApplies(x, w, {}));
  EXPECT_TRUE(SmallBatchLinearApplies(x, w, at::randn({4})));
  EXPECT_FALSE(SmallBatchLinearApplies(x.to(at::kDouble), w.to(at::kDouble), {}));
  EXPECT_FALSE(SmallBatchLinearApplies(x.to(at::kBFloat16), w.to(at::kBFloat16), {}));
  EXPECT_FALSE(SmallBatchLinearApplies(x, at::randn({8, 4}).t(), {}));  // weight not contiguous
  EXPECT_FALSE(SmallBatchLinearApplies(x, w, at::randn({5})));          // bias of another size
  EXPECT_FALSE(SmallBatchLinearApplies(at::randn({2, 7}), w, {}));      // in differs
  // [in, out] (Conv1D): the bias follows out = size(1).
  EXPECT_TRUE(SmallBatchLinearApplies(x, at::randn({8, 4}), at::randn({4}), WeightLayout::kInOut));
  EXPECT_FALSE(SmallBatchLinearApplies(x, at::randn({8, 4}), at::randn({8}), WeightLayout::kInOut));
  EXPECT_FALSE(SmallBatchLinearApplies(x, w, {}, WeightLayout::kInOut));  // [4, 8]: in is 4
}

TEST(SmallBatchLinearLimits, Avx512RowsFollowTheBlasSgemmTheyCompeteWith) {
  // OpenBLAS without AVX-512 sgemm kernels: prompt chunks too.
  EXPECT_EQ(Avx512OutInMaxRows("Haswell", "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"), 256);
  EXPECT_EQ(Avx512OutInMaxRows("Zen", ""), 256);
  // OpenBLAS with them: decode steps only.
  EXPECT_EQ(Avx512OutInMaxRows("SkylakeX", ""), 32);
  EXPECT_EQ(Avx512OutInMaxRows("COOPERLAKE", ""), 32);
  EXPECT_EQ(Avx512OutInMaxRows("SapphireRapids", ""), 32);
  // Not OpenBLAS: the reference BLAS loses everywhere, anything else is assumed good.
  EXPECT_EQ(Avx512OutInMaxRows("", "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"), 256);
  EXPECT_EQ(Avx512OutInMaxRows("", "/opt/intel/oneapi/mkl/lib/libmkl_rt.so.2"), 32);
  // This process's BLAS answers when it is OpenBLAS.
  if (BlasLibraryInUse().find("openblas") != std::string::npos) {
    EXPECT_FALSE(base::OpenBlasCoreName().empty());
  }
}

TEST(SmallBatchLinearInLinear, DecodeRowsAreBatchInvariantUpToTheKernelsLimit) {
  const VectorIsa isa = DetectVectorIsa();
  if (isa == VectorIsa::kNone) GTEST_SKIP() << "no AVX2 here: Linear uses BLAS";
  const int64_t limit = SmallBatchLinearMaxRows(isa);
  const at::Tensor x = at::randn({limit, 96});
  const at::Tensor w = at::randn({80, 96});
  const at::Tensor batch = Linear(x, w);
  for (int64_t r : {int64_t{0}, limit / 2, limit - 1}) {
    EXPECT_TRUE(at::equal(Linear(x.slice(0, r, r + 1), w)[0], batch[r])) << "row " << r;
  }
}

}  // namespace
}  // namespace placer::model
