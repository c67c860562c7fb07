// The BF16 prompt-chunk kernel behind Linear for BF16 [out, in] weights: against a float64 sum
// of the same BF16 products for every block and tile remainder, odd inputs, BF16 and float32
// biases; a row's result bit for bit the same in any call (alone, batched, shuffled, any thread
// count); the rounding of ATen's conversion on ties, denormals and NaN; the rows-per-task form
// (packed weights); and Linear handing it exactly the row counts it takes.
#include "model/prompt_chunk_bf16.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "model/quantized_linear.h"
#include "model/small_batch_bf16.h"
#include "model/tensor_ops.h"

namespace placer::model {
namespace {

at::Tensor RandomBf16(std::vector<int64_t> shape) {
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat)).to(at::kBFloat16);
}

// y within one BF16 rounding of the float64 sum of the same BF16 products, plus float32
// accumulation over `in` of them.
void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& w,
                          const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(y.scalar_type(), at::kBFloat16) << what;
  const at::Tensor x64 = x.to(at::kDouble).reshape({-1, x.size(-1)});
  const at::Tensor w64 = w.to(at::kDouble);
  at::Tensor reference = at::matmul(x64, w64.t());
  if (b.defined()) reference = reference + b.to(at::kDouble);
  const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
  const at::Tensor error = (y.reshape({-1, w.size(0)}).to(at::kDouble) - reference).abs();
  const at::Tensor allowed = reference.abs() * std::ldexp(1.0, -8) + magnitude * 1e-6;
  EXPECT_TRUE(at::all(error <= allowed).item<bool>())
      << what << ": worst error " << (error - allowed).max().item<double>() << " beyond";
}

class PromptChunkBf16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PromptChunkBf16Runs()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
    at::manual_seed(11);
  }
};

TEST_F(PromptChunkBf16Test, MatchesFloat64ForEveryBlockTileRemainderAndOddInput) {
  // Rows: one partial vector, each partial block of 1-4 vectors, whole blocks, a block and a
  // row; inputs odd and even (the last input paired with zero), past a span of 128 pairs (the
  // rearrangement's tasks); outs below, at and past each tile's 6 / 8 / 12 / 24 rows and a
  // task's 48.
  for (int64_t rows : {1, 15, 17, 33, 49, 64, 65, 130}) {
    for (int64_t in : {1, 2, 17, 200, 301}) {
      for (int64_t out : {1, 5, 7, 25, 49, 100}) {
        for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
          const at::Tensor x = RandomBf16({rows, in});
          const at::Tensor w = RandomBf16({out, in});
          at::Tensor b;
          if (bias_kind == 1) b = RandomBf16({out});
          if (bias_kind == 2) b = at::randn({out});
          const at::Tensor y = PromptChunkLinearBf16(x, w, b);
          const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                                   " out " + std::to_string(out) + " bias " + std::to_string(bias_kind);
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out})) << what;
          ExpectMatchesFloat64(y, x, w, b, what);
        }
      }
    }
  }
}

TEST_F(PromptChunkBf16Test, ARowIsTheSameAloneInAnyBatchAndWithAnyThreads) {
  const at::Tensor x = RandomBf16({150, 301});
  const at::Tensor w = RandomBf16({205, 301});
  const at::Tensor b = RandomBf16({205});
  const at::Tensor batch = PromptChunkLinearBf16(x, w, b);
  for (int64_t r : {0, 15, 16, 63, 64, 100, 149}) {
    EXPECT_TRUE(at::equal(PromptChunkLinearBf16(x.slice(0, r, r + 1), w, b)[0], batch[r]))
        << "row " << r << " alone vs in the batch";
    const int64_t first = std::max<int64_t>(0, r - 40);
    EXPECT_TRUE(at::equal(PromptChunkLinearBf16(x.slice(0, first, r + 1), w, b)[r - first], batch[r]))
        << "row " << r << " in rows " << first << ".." << r;
  }
  const at::Tensor order = at::randperm(150);
  EXPECT_TRUE(at::equal(PromptChunkLinearBf16(x.index_select(0, order), w, b),
                        batch.index_select(0, order)));
  const int threads = at::get_num_threads();
  at::set_num_threads(threads == 1 ? 2 : 1);
  const at::Tensor other_threads = PromptChunkLinearBf16(x, w, b);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(other_threads, batch));
}

TEST_F(PromptChunkBf16Test, RoundsAsAtenConvertsTiesDenormalsAndNan) {
  // One input of 1 and one weight per output: each output is exactly the float32 bias plus the
  // BF16 weight, so the only rounding is the final one, compared with c10's conversion.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> sums = {
      1.0f + std::ldexp(1.0f, -8),             // a tie, even below: rounds down
      1.0f + 3 * std::ldexp(1.0f, -8),         // a tie, odd below: rounds up
      1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20),  // just past a tie
      std::ldexp(1.0f, -130),                  // a float32 denormal: kept, not flushed
      -std::ldexp(3.0f, -135),                 // a negative one
      nan,
      3.0e38f,                                 // rounds to infinity
  };
  const int64_t out = static_cast<int64_t>(sums.size());
  const at::Tensor x = at::ones({20, 1}).to(at::kBFloat16);
  const at::Tensor w = at::zeros({out, 1}).to(at::kBFloat16);
  const at::Tensor b = at::tensor(sums);
  const at::Tensor y = PromptChunkLinearBf16(x, w, b);
  for (int64_t n = 0; n < out; ++n) {
    const uint16_t want = at::BFloat16(sums[static_cast<size_t>(n)]).x;
    for (int64_t r = 0; r < 20; ++r) {
      EXPECT_EQ(y[r][n].item<at::BFloat16>().x, want) << "output " << n << " row " << r;
    }
  }
}

TEST_F(PromptChunkBf16Test, KeepsTheLeadingShapeAndTakesStridedInput) {
  const at::Tensor w = RandomBf16({24, 16});
  const at::Tensor x = RandomBf16({2, 40, 16});
  const at::Tensor y = PromptChunkLinearBf16(x, w, {});
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{2, 40, 24}));
  ExpectMatchesFloat64(y, x, w, {}, "leading shape");
  const at::Tensor strided = RandomBf16({16, 70}).t();
  ASSERT_FALSE(strided.is_contiguous());
  ExpectMatchesFloat64(PromptChunkLinearBf16(strided, w, {}), strided, w, {}, "strided");
  EXPECT_EQ(PromptChunkLinearBf16(RandomBf16({0, 16}), w, {}).sizes(), (at::IntArrayRef{0, 24}));
}

TEST_F(PromptChunkBf16Test, RowsGivenATaskAtATimeGiveTheDenseWeightsProducts) {
  const at::Tensor w = RandomBf16({101, 73});
  const at::Tensor b = RandomBf16({101});
  std::atomic<int64_t> rows_given{0};
  const DenseBf16WeightRows rows = [&](int64_t first, int64_t count, uint16_t* out) {
    EXPECT_LE(count, 48);
    EXPECT_LE(first + count, 101);
    std::memcpy(out, w.data_ptr<at::BFloat16>() + first * 73, sizeof(uint16_t) * count * 73);
    rows_given += count;
  };
  for (int64_t n : {1, 64, 130}) {
    rows_given = 0;
    const at::Tensor x = RandomBf16({n, 73});
    EXPECT_TRUE(at::equal(PromptChunkLinearBf16(x, 101, rows, b), PromptChunkLinearBf16(x, w, b))) << n;
    EXPECT_EQ(rows_given.load(), 101) << "every weight row once, whatever the blocks of inputs";
  }
  const at::Tensor x = RandomBf16({5, 73});
  EXPECT_TRUE(at::equal(PromptChunkLinearBf16(x, 101, rows, {}), PromptChunkLinearBf16(x, w, {})));
}

TEST_F(PromptChunkBf16Test, LinearHandsItTheRowsPastTheFewRowKernelsUpToItsLimit) {
  const int64_t few = SmallBatchBf16MaxRows(DetectBf16Isa());
  if (BfloatGemmHasAmx()) {
    // oneDNN's GEMM on AMX tiles keeps every chunk past the few-row kernels.
    const at::Tensor w = RandomBf16({80, 96});
    for (int64_t rows : {few + 1, int64_t{64}, int64_t{128}}) {
      EXPECT_FALSE(PromptChunkBf16Takes(rows)) << rows;
      const at::Tensor x = RandomBf16({rows, 96});
      ExpectMatchesFloat64(Linear(x, w, {}), x, w, {}, "Linear on AMX at " + std::to_string(rows));
    }
    return;
  }
  EXPECT_FALSE(PromptChunkBf16Takes(few));
  EXPECT_TRUE(PromptChunkBf16Takes(few + 1));
  EXPECT_TRUE(PromptChunkBf16Takes(128));
  EXPECT_FALSE(PromptChunkBf16Takes(129));
  const at::Tensor w = RandomBf16({80, 96});
  const at::Tensor b = RandomBf16({80});
  for (int64_t rows : {few + 1, int64_t{128}}) {
    const at::Tensor x = RandomBf16({rows, 96});
    EXPECT_TRUE(at::equal(Linear(x, w, b), PromptChunkLinearBf16(x, w, b))) << rows;
  }
  // The few-row kernels below, ATen's GEMM above: same products within BF16 rounding.
  for (int64_t rows : {few, int64_t{129}}) {
    const at::Tensor x = RandomBf16({rows, 96});
    ExpectMatchesFloat64(Linear(x, w, b), x, w, b, "Linear at " + std::to_string(rows) + " rows");
  }
}

TEST_F(PromptChunkBf16Test, SeveralWeightsGivenATaskAtATimeGiveEachWeightsOwnProductBitForBit) {
  const std::vector<at::Tensor> weights = {RandomBf16({7, 41}), RandomBf16({100, 41}), RandomBf16({0, 41}),
                                           RandomBf16({48, 41})};
  const std::vector<at::Tensor> biases = {RandomBf16({7}), at::Tensor(), at::Tensor(), at::randn({48})};
  std::vector<std::atomic<int64_t>> rows_given(weights.size());
  std::vector<DenseBf16WeightRows> sources;
  std::vector<int64_t> outs;
  for (size_t i = 0; i < weights.size(); ++i) {
    outs.push_back(weights[i].size(0));
    sources.push_back([&, i](int64_t first, int64_t count, uint16_t* out) {
      EXPECT_LE(count, 48);
      EXPECT_LE(first + count, weights[i].size(0)) << "weight " << i;
      std::memcpy(out, weights[i].data_ptr<at::BFloat16>() + first * 41, sizeof(uint16_t) * count * 41);
      rows_given[i] += count;
    });
  }
  for (int64_t rows : {33, 64, 100}) {
    const at::Tensor x = RandomBf16({rows, 41});
    std::vector<RowSourceBytes> source_bytes;
    for (const at::Tensor& w : weights) {
      source_bytes.push_back({reinterpret_cast<const uint8_t*>(w.data_ptr<at::BFloat16>()), 41 * 2});
    }
    for (bool told : {false, true}) {
      for (auto& given : rows_given) given = 0;
      const std::vector<at::Tensor> ys = PromptChunkLinearsBf16(
          x, outs, sources, biases, told ? source_bytes : std::vector<RowSourceBytes>{});
      ASSERT_EQ(ys.size(), weights.size());
      for (size_t i = 0; i < weights.size(); ++i) {
        EXPECT_TRUE(at::equal(ys[i], PromptChunkLinearBf16(x, weights[i], biases[i])))
            << "weight " << i << ", " << rows << " rows, told " << told;
        EXPECT_EQ(rows_given[i].load(), weights[i].size(0)) << "weight " << i << ", " << rows << " rows";
      }
    }
  }
  try {
    PromptChunkLinearsBf16(RandomBf16({64, 41}), {8, 8}, {sources[0], sources[0]},
                           {at::Tensor(), RandomBf16({9})});
    ADD_FAILURE() << "a bias of another height was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight 1"), std::string::npos) << e.what();
  }
}

TEST_F(PromptChunkBf16Test, SeveralWeightsOfOneInputGiveEachWeightsOwnProductBitForBit) {
  // Unequal heights (below a task's 48 rows, past two tasks, none), BF16 and float32 biases,
  // an odd input width; rows in one block and past it.
  for (int64_t rows : {33, 64, 100}) {
    const at::Tensor x = RandomBf16({rows, 41});
    const std::vector<at::Tensor> weights = {RandomBf16({7, 41}), RandomBf16({100, 41}),
                                             RandomBf16({0, 41}), RandomBf16({48, 41})};
    const std::vector<at::Tensor> biases = {RandomBf16({7}), at::Tensor(), at::Tensor(), at::randn({48})};
    const std::vector<at::Tensor> ys = PromptChunkLinearsBf16(x, weights, biases);
    ASSERT_EQ(ys.size(), weights.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      EXPECT_TRUE(at::equal(ys[i], PromptChunkLinearBf16(x, weights[i], biases[i])))
          << "weight " << i << ", " << rows << " rows";
    }
  }
}

TEST_F(PromptChunkBf16Test, LinearsOfOneInputEqualLinearOfEachAtEveryRowCount) {
  for (int64_t rows : {int64_t{1}, SmallBatchBf16MaxRows(Bf16Isa::kAvx512Bf16) + 1, int64_t{128},
                       int64_t{129}}) {
    const at::Tensor x = RandomBf16({rows, 64});
    const std::vector<at::Tensor> weights = {RandomBf16({96, 64}), RandomBf16({32, 64})};
    const std::vector<at::Tensor> biases = {at::Tensor(), RandomBf16({32})};
    const std::vector<at::Tensor> ys = LinearsOfOneInput(x, weights, biases);
    for (size_t i = 0; i < weights.size(); ++i) {
      EXPECT_TRUE(at::equal(ys[i], Linear(x, weights[i], biases[i]))) << "weight " << i << ", " << rows << " rows";
    }
  }
}

}  // namespace
}  // namespace placer::model
