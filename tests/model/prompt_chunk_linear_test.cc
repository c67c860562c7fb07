// The prompt-chunk kernel behind Linear for float32 [out, in] weights: the same products as a
// float64 reference for every block and tile remainder (bias or not), a row's result bit for
// bit the same in any call of the kernel (alone, batched, shuffled, any thread count), and
// Linear handing it exactly the row counts it takes.
#include "model/prompt_chunk_linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "model/tensor_ops.h"
#include "tests/model/linear_reference.h"

namespace placer::model {
namespace {

class PromptChunkLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PromptChunkLinearRuns()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
    at::manual_seed(7);
  }
};

TEST_F(PromptChunkLinearTest, MatchesFloat64ForEveryBlockAndTileRemainder) {
  // Rows: one partial vector, each partial block of 1-4 vectors, whole blocks, a block and a
  // row; ins: a partial span of 16 columns, whole ones, spans of 128 (the transposes' tasks)
  // and a part of one; outs: below, at and past each tile's 6 / 8 / 12 / 24 rows and a task's 48.
  for (int64_t rows : {1, 15, 17, 33, 49, 64, 65, 130}) {
    for (int64_t in : {1, 16, 17, 200, 300}) {
      for (int64_t out : {1, 5, 7, 25, 49, 100}) {
        for (bool with_bias : {false, true}) {
          const at::Tensor x = at::randn({rows, in});
          const at::Tensor w = at::randn({out, in});
          const at::Tensor b = with_bias ? at::randn({out}) : at::Tensor();
          const at::Tensor y = PromptChunkLinear(x, w, b);
          const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                                   " out " + std::to_string(out) + (with_bias ? " bias" : "");
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out})) << what;
          ExpectMatchesFloat64(y, x, w, b, what);
        }
      }
    }
  }
}

TEST_F(PromptChunkLinearTest, ARowIsTheSameAloneInAnyBatchAndWithAnyThreads) {
  const at::Tensor x = at::randn({150, 300});
  const at::Tensor w = at::randn({205, 300});
  const at::Tensor b = at::randn({205});
  const at::Tensor batch = PromptChunkLinear(x, w, b);
  for (int64_t r : {0, 15, 16, 63, 64, 100, 149}) {
    EXPECT_TRUE(at::equal(PromptChunkLinear(x.slice(0, r, r + 1), w, b)[0], batch[r]))
        << "row " << r << " alone vs in the batch";
    // The row inside a shorter call, at another position, in another block size.
    const int64_t first = std::max<int64_t>(0, r - 40);
    EXPECT_TRUE(at::equal(PromptChunkLinear(x.slice(0, first, r + 1), w, b)[r - first], batch[r]))
        << "row " << r << " in rows " << first << ".." << r;
  }
  const at::Tensor order = at::randperm(150);
  const at::Tensor shuffled = PromptChunkLinear(x.index_select(0, order), w, b);
  EXPECT_TRUE(at::equal(shuffled, batch.index_select(0, order)));
  const int threads = at::get_num_threads();
  at::set_num_threads(threads == 1 ? 2 : 1);
  const at::Tensor other_threads = PromptChunkLinear(x, w, b);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(other_threads, batch));
}

TEST_F(PromptChunkLinearTest, KeepsTheLeadingShapeAndTakesStridedInput) {
  const at::Tensor w = at::randn({24, 16});
  const at::Tensor x = at::randn({2, 40, 16});
  const at::Tensor y = PromptChunkLinear(x, w, {});
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{2, 40, 24}));
  ExpectMatchesFloat64(y.view({80, 24}), x.view({80, 16}), w, {}, "leading shape");
  const at::Tensor strided = at::randn({16, 70}).t();  // [70, 16], not contiguous
  ASSERT_FALSE(strided.is_contiguous());
  ExpectMatchesFloat64(PromptChunkLinear(strided, w, {}), strided, w, {}, "strided");
  EXPECT_EQ(PromptChunkLinear(at::randn({0, 16}), w, {}).sizes(), (at::IntArrayRef{0, 24}));
}

TEST_F(PromptChunkLinearTest, RowsGivenATaskAtATimeGiveTheDenseWeightsProducts) {
  const at::Tensor w = at::randn({101, 72});
  const at::Tensor b = at::randn({101});
  std::atomic<int64_t> rows_given{0};
  const DenseWeightRows rows = [&](int64_t first, int64_t count, float* out) {
    // At most one task's rows (48), whole rows of the weight.
    EXPECT_LE(count, 48);
    EXPECT_LE(first + count, 101);
    std::memcpy(out, w.data_ptr<float>() + first * 72, sizeof(float) * count * 72);
    rows_given += count;
  };
  for (int64_t n : {1, 64, 130}) {
    rows_given = 0;
    const at::Tensor x = at::randn({n, 72});
    EXPECT_TRUE(at::equal(PromptChunkLinear(x, 101, rows, b), PromptChunkLinear(x, w, b))) << n;
    EXPECT_EQ(rows_given.load(), 101) << "every weight row once, whatever the blocks of inputs";
  }
  const at::Tensor x = at::randn({5, 72});
  EXPECT_TRUE(at::equal(PromptChunkLinear(x, 101, rows, {}), PromptChunkLinear(x, w, {})));
}

TEST_F(PromptChunkLinearTest, LinearHandsItTheRowsPastTheFewRowKernelsUpToItsLimit) {
  // 33-128 rows on every AVX-512 CPU, whatever SmallBatchLinearMaxRows says (256 where the
  // BLAS has no AVX-512 sgemm: the few-row kernels then keep 129-256); with AVX2 alone 17-192.
  const bool avx2 = DetectVectorIsa() == VectorIsa::kAvx2;
  const int64_t few = avx2 ? 16 : 32, most = avx2 ? 192 : 128;
  EXPECT_FALSE(PromptChunkLinearTakes(few));
  EXPECT_FALSE(PromptChunkLinearTakes(most + 1));
  EXPECT_TRUE(PromptChunkLinearTakes(few + 1));
  EXPECT_TRUE(PromptChunkLinearTakes(most));
  const at::Tensor w = at::randn({80, 96});
  const at::Tensor b = at::randn({80});
  for (int64_t rows : {few + 1, int64_t{28}, most}) {
    const at::Tensor x = at::randn({rows, 96});
    EXPECT_TRUE(at::equal(Linear(x, w, b), PromptChunkLinear(x, w, b))) << rows << " rows";
  }
  // Past the limit: the few-row kernels where they keep those rows (no AVX-512 sgemm), else
  // sgemm (rows padded: padded_sgemm.h).
  for (int64_t rows : {most + 1, most + 7}) {
    const at::Tensor x = at::randn({rows, 96});
    ExpectMatchesFloat64(Linear(x, w, b), x, w, b, std::to_string(rows) + " rows");
    const VectorIsa isa = DetectVectorIsa();
    if (SmallBatchLinearMaxRows(isa) >= rows) {
      EXPECT_TRUE(at::equal(Linear(x, w, b), SmallBatchLinear(x, w, b, isa)));
    }
  }
  // Up to `few` rows: the few-row kernels.
  const at::Tensor x_few = at::randn({few, 96});
  EXPECT_TRUE(at::equal(Linear(x_few, w, b), SmallBatchLinear(x_few, w, b, DetectVectorIsa())));
}

TEST_F(PromptChunkLinearTest, SeveralWeightsGivenATaskAtATimeGiveEachWeightsOwnProductBitForBit) {
  // Unequal heights (below a task's 48 rows, past two tasks, none), a bias on some; each
  // weight's rows asked for once, from that weight's own source.
  const std::vector<at::Tensor> weights = {at::randn({7, 40}), at::randn({100, 40}), at::randn({0, 40}),
                                           at::randn({48, 40})};
  const std::vector<at::Tensor> biases = {at::randn({7}), at::Tensor(), at::Tensor(), at::randn({48})};
  std::vector<std::atomic<int64_t>> rows_given(weights.size());
  std::vector<DenseWeightRows> sources;
  std::vector<int64_t> outs;
  for (size_t i = 0; i < weights.size(); ++i) {
    outs.push_back(weights[i].size(0));
    sources.push_back([&, i](int64_t first, int64_t count, float* out) {
      EXPECT_LE(count, 48);
      EXPECT_LE(first + count, weights[i].size(0)) << "weight " << i;
      std::memcpy(out, weights[i].data_ptr<float>() + first * 40, sizeof(float) * count * 40);
      rows_given[i] += count;
    });
  }
  for (int64_t rows : {33, 64, 100}) {
    const at::Tensor x = at::randn({rows, 40});
    // Told where the sources read (here the float rows themselves), the kernel fetches the
    // next task's bytes ahead: the same products.
    std::vector<RowSourceBytes> source_bytes;
    for (const at::Tensor& w : weights) {
      source_bytes.push_back({reinterpret_cast<const uint8_t*>(w.data_ptr<float>()), 40 * 4});
    }
    for (bool told : {false, true}) {
      for (auto& given : rows_given) given = 0;
      const std::vector<at::Tensor> ys =
          PromptChunkLinears(x, outs, sources, biases, told ? source_bytes : std::vector<RowSourceBytes>{});
      ASSERT_EQ(ys.size(), weights.size());
      for (size_t i = 0; i < weights.size(); ++i) {
        EXPECT_TRUE(at::equal(ys[i], PromptChunkLinear(x, weights[i], biases[i])))
            << "weight " << i << ", " << rows << " rows, told " << told;
        EXPECT_EQ(rows_given[i].load(), weights[i].size(0)) << "weight " << i << ", " << rows << " rows";
      }
    }
  }
  try {
    PromptChunkLinears(at::randn({64, 40}), {8, 8}, {sources[0], sources[0]}, {at::Tensor(), at::randn({9})});
    ADD_FAILURE() << "a bias of another height was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight 1"), std::string::npos) << e.what();
  }
}

TEST_F(PromptChunkLinearTest, SeveralWeightsOfOneInputGiveEachWeightsOwnProductBitForBit) {
  // q, k and v of unequal heights (one below a task's 48 rows, one past two tasks), biases on
  // some; a weight with no rows; rows in one block and past it.
  for (int64_t rows : {33, 64, 100}) {
    const at::Tensor x = at::randn({rows, 40});
    const std::vector<at::Tensor> weights = {at::randn({7, 40}), at::randn({100, 40}), at::randn({0, 40}),
                                             at::randn({48, 40})};
    const std::vector<at::Tensor> biases = {at::randn({7}), at::Tensor(), at::Tensor(), at::randn({48})};
    const std::vector<at::Tensor> ys = PromptChunkLinears(x, weights, biases);
    ASSERT_EQ(ys.size(), weights.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      EXPECT_TRUE(at::equal(ys[i], PromptChunkLinear(x, weights[i], biases[i])))
          << "weight " << i << ", " << rows << " rows";
      // Linear gives these rows to this kernel only where the few-row kernels stop before them
      // (on a CPU whose BLAS lacks AVX-512 sgemm they take up to 256 rows).
      if (PromptChunkLinearTakes(rows)) {
        EXPECT_TRUE(at::equal(ys[i], Linear(x, weights[i], biases[i])))
            << "weight " << i << ", " << rows << " rows";
      }
    }
  }
  // The operands are checked one by one, naming the weight.
  try {
    PromptChunkLinears(at::randn({64, 40}), {at::randn({8, 40}), at::randn({8, 41})}, {{}, {}});
    ADD_FAILURE() << "a weight of another width was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight 1"), std::string::npos) << e.what();
  }
}

TEST_F(PromptChunkLinearTest, LinearsOfOneInputEqualLinearOfEachAtEveryRowCount) {
  // Row counts of the few-row kernels, of this kernel and past it (sgemm): the same bits as
  // Linear of each pair, whichever path the count takes.
  for (int64_t rows : {int64_t{1}, int64_t{8}, SmallBatchLinearMaxRows(VectorIsa::kAvx512) + 1,
                       int64_t{128}, int64_t{129}}) {
    const at::Tensor x = at::randn({rows, 64});
    const std::vector<at::Tensor> weights = {at::randn({96, 64}), at::randn({32, 64})};
    const std::vector<at::Tensor> biases = {at::Tensor(), at::randn({32})};
    const std::vector<at::Tensor> ys = LinearsOfOneInput(x, weights, biases);
    for (size_t i = 0; i < weights.size(); ++i) {
      // Linear gives these rows to this kernel only where the few-row kernels stop before them
      // (on a CPU whose BLAS lacks AVX-512 sgemm they take up to 256 rows).
      if (PromptChunkLinearTakes(rows)) {
        EXPECT_TRUE(at::equal(ys[i], Linear(x, weights[i], biases[i])))
            << "weight " << i << ", " << rows << " rows";
      }
    }
  }
}

}  // namespace
}  // namespace placer::model
