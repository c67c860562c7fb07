// DecodeAttention: the decode rows of a step over the paged pool give what CausalAttention
// gives over the same keys (scattered blocks, grouped-query heads, sliding windows, head
// sizes that are not a multiple of the vector width), store the new keys and values in their
// blocks, and give a row the same bits alone as inside any batch; a prompt chunk's rows of one
// sequence see each other's keys; for float32 and BF16 pools
// (BF16: against float attention over the same BF16 values, within one BF16 rounding).
#include "model/decode_attention.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "model/decode_attention_rows.h"
#include "model/tensor_ops.h"

namespace placer::model {
namespace {

constexpr int64_t kHeads = 6;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 20;  // 2 vectors of 8 and a tail of 4
constexpr int64_t kBlock = KvBlockPool::kBlockPositions;

struct Operands {
  VectorIsa isa;
  at::ScalarType dtype;
  int64_t head_dim = kHeadDim;
};

class DecodeAttentionTest : public ::testing::TestWithParam<Operands> {
 protected:
  void SetUp() override {
    if (GetParam().isa != VectorIsa::kNone && DetectVectorIsa() == VectorIsa::kNone) {
      GTEST_SKIP() << "this CPU has no AVX2";
    }
    if (GetParam().isa == VectorIsa::kAvx512 && DetectVectorIsa() != VectorIsa::kAvx512) {
      GTEST_SKIP() << "this CPU has no AVX-512";
    }
    auto pool = KvBlockPool::Create({{at::Device(at::kCPU), "cpu"}}, kKvHeads, HeadDim(),
                                    /*blocks=*/8, GetParam().dtype,
                                    std::make_shared<runtime::RuntimeAccounting>(
                                        std::vector<std::string>{"cpu"}));
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *pool;
    at::manual_seed(7);
    pool_->keys(0).normal_();
    pool_->values(0).normal_();
  }

  at::Tensor Randn(at::IntArrayRef shape) const { return at::randn(shape).to(GetParam().dtype); }
  bool Bf16() const { return GetParam().dtype == at::kBFloat16; }
  VectorIsa Isa() const { return GetParam().isa; }
  int64_t HeadDim() const { return GetParam().head_dim; }

  // The keys (or values) of positions 0..length-1 of a sequence, gathered from its blocks:
  // [kv_heads, length, head_dim].
  at::Tensor Gather(const at::Tensor& pool, const std::vector<int32_t>& blocks,
                    int64_t length) const {
    std::vector<int64_t> slots;
    for (int64_t p = 0; p < length; ++p) slots.push_back(blocks[p / kBlock] * kBlock + p % kBlock);
    return pool.index_select(1, at::tensor(slots, at::kLong));
  }

  std::shared_ptr<KvBlockPool> pool_;
};

TEST_P(DecodeAttentionTest, EqualsCausalAttentionOverScatteredBlocks) {
  const std::vector<std::vector<int32_t>> tables = {{5, 2}, {0}, {3, 4, 6}};
  const std::vector<int64_t> positions = {20, 0, 40};
  const int64_t rows = 3;
  const at::Tensor q = Randn({rows, kHeads, HeadDim()});
  // Row stride wider than a row, as a view into a fused q/k/v projection has.
  const at::Tensor kv = Randn({rows, 2, kKvHeads, HeadDim()});
  const at::Tensor k = kv.select(1, 0);
  const at::Tensor v = kv.select(1, 1);
  for (int64_t window : {int64_t{0}, int64_t{7}}) {
    SCOPED_TRACE(window);
    std::vector<DecodeRow> decode;
    for (int64_t r = 0; r < rows; ++r) decode.push_back({r, positions[r], &tables[r]});
    at::Tensor out = at::full({rows, kHeads * HeadDim()}, 123.0f).to(GetParam().dtype);
    DecodeAttention(q, k, v, *pool_, 0, window, decode, out, Isa());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t length = positions[r] + 1;
      const at::Tensor keys = Gather(pool_->keys(0), tables[r], length);
      const at::Tensor values = Gather(pool_->values(0), tables[r], length);
      // The new token's key and value went to its slot.
      EXPECT_TRUE(at::equal(keys.select(1, positions[r]), k[r])) << "row " << r;
      EXPECT_TRUE(at::equal(values.select(1, positions[r]), v[r])) << "row " << r;
      // In float over the same (BF16) values: the kernel computes in float and rounds once.
      const at::Tensor want = CausalAttention(q[r].unsqueeze(1).to(at::kFloat),
                                              keys.to(at::kFloat), values.to(at::kFloat), window)
                                  .transpose(0, 1)
                                  .reshape({kHeads * HeadDim()});
      const at::Tensor got = out[r].to(at::kFloat);
      const double tolerance = Bf16() ? 4e-3 : 1e-5;  // BF16: half a unit in the 8th bit, twice
      EXPECT_TRUE(at::allclose(got, want, tolerance, tolerance))
          << "row " << r << " max diff " << (got - want).abs().max().item<float>();
    }
  }
}

TEST_P(DecodeAttentionTest, WindowChangesTheResultOnlyPastIt) {
  const std::vector<int32_t> table = {1, 7};
  const at::Tensor q = Randn({1, kHeads, HeadDim()});
  const at::Tensor k = Randn({1, kKvHeads, HeadDim()});
  const at::Tensor v = Randn({1, kKvHeads, HeadDim()});
  auto attend = [&](int64_t position, int64_t window) {
    at::Tensor out = at::empty({1, kHeads * HeadDim()}, q.options());
    DecodeAttention(q, k, v, *pool_, 0, window, {{0, position, &table}}, out, Isa());
    return out;
  };
  // Window wider than what is cached: the same bits as no window.
  EXPECT_TRUE(at::equal(attend(5, 0), attend(5, 6)));
  EXPECT_FALSE(at::allclose(attend(25, 0), attend(25, 4)));
  // Window 1: each query head sees only the new token, so it gets its value back.
  const at::Tensor only_new = attend(25, 1).view({kKvHeads, kHeads / kKvHeads, HeadDim()});
  for (int64_t g = 0; g < kHeads / kKvHeads; ++g) {
    // BF16: the value goes through float and back, exactly.
    EXPECT_TRUE(at::allclose(only_new.select(1, g), v[0], 1e-6, 1e-6));
  }
}

TEST_P(DecodeAttentionTest, RowIsTheSameBitsAloneAndInAnyBatch) {
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2}, {3}, {4, 6}, {5, 7}};
  const std::vector<int64_t> positions = {37, 9, 30, 17};
  const at::Tensor q = Randn({4, kHeads, HeadDim()});
  const at::Tensor k = Randn({4, kKvHeads, HeadDim()});
  const at::Tensor v = Randn({4, kKvHeads, HeadDim()});
  at::Tensor alone = at::empty({4, kHeads * HeadDim()}, q.options());
  for (int64_t r = 0; r < 4; ++r) {
    DecodeAttention(q, k, v, *pool_, 0, 0, {{r, positions[r], &tables[r]}}, alone, Isa());
  }
  at::Tensor batch = at::empty({4, kHeads * HeadDim()}, q.options());
  DecodeAttention(q, k, v, *pool_, 0, 0,
                  {{3, positions[3], &tables[3]}, {1, positions[1], &tables[1]},
                   {0, positions[0], &tables[0]}, {2, positions[2], &tables[2]}},
                  batch, Isa());
  EXPECT_EQ(std::memcmp(alone.data_ptr(), batch.data_ptr(), alone.nbytes()), 0);
}

TEST_P(DecodeAttentionTest, APromptChunksRowsSeeTheKeysOfTheRowsBeforeThem) {
  // 12 new tokens of one sequence after 10 cached ones, listed last row first: every row's
  // key and value is stored before any row attends, so each sees its predecessors' keys.
  const std::vector<int32_t> table = {2, 5, 1};
  const int64_t cached = 10, chunk = 12;
  const at::Tensor q = Randn({chunk, kHeads, HeadDim()});
  const at::Tensor k = Randn({chunk, kKvHeads, HeadDim()});
  const at::Tensor v = Randn({chunk, kKvHeads, HeadDim()});
  for (int64_t window : {int64_t{0}, int64_t{7}}) {
    SCOPED_TRACE(window);
    std::vector<DecodeRow> rows;
    for (int64_t r = chunk - 1; r >= 0; --r) rows.push_back({r, cached + r, &table});
    at::Tensor out = at::empty({chunk, kHeads * HeadDim()}, q.options());
    DecodeAttention(q, k, v, *pool_, 0, window, rows, out, Isa());
    const at::Tensor keys = Gather(pool_->keys(0), table, cached + chunk);
    const at::Tensor values = Gather(pool_->values(0), table, cached + chunk);
    EXPECT_TRUE(at::equal(keys.narrow(1, cached, chunk), k.transpose(0, 1)));
    EXPECT_TRUE(at::equal(values.narrow(1, cached, chunk), v.transpose(0, 1)));
    // The chunk's queries at once through CausalAttention's mask, in float.
    const at::Tensor want = CausalAttention(q.transpose(0, 1).to(at::kFloat), keys.to(at::kFloat),
                                            values.to(at::kFloat), window)
                                .transpose(0, 1)
                                .reshape({chunk, kHeads * HeadDim()});
    const at::Tensor got = out.to(at::kFloat);
    const double tolerance = Bf16() ? 4e-3 : 1e-5;
    EXPECT_TRUE(at::allclose(got, want, tolerance, tolerance))
        << "max diff " << (got - want).abs().max().item<float>();
  }
}

TEST_P(DecodeAttentionTest, PlainTensorsGiveThePoolsBitsAndBlocksOutsideThemAreRefused) {
  // Rows over a scratch [kv_heads, positions, head_dim] pair, as a one-off Forward has, give the
  // bits of the same rows over the pool's blocks.
  const std::vector<int32_t> pool_table = {6, 3};
  const std::vector<int32_t> scratch_table = {0, 1};
  const int64_t length = 2 * kBlock - 3;
  const at::Tensor q = Randn({length, kHeads, HeadDim()});
  const at::Tensor k = Randn({length, kKvHeads, HeadDim()});
  const at::Tensor v = Randn({length, kKvHeads, HeadDim()});
  std::vector<DecodeRow> in_pool, in_scratch;
  for (int64_t r = 0; r < length; ++r) {
    in_pool.push_back({r, r, &pool_table});
    in_scratch.push_back({r, r, &scratch_table});
  }
  at::Tensor from_pool = at::empty({length, kHeads * HeadDim()}, q.options());
  DecodeAttention(q, k, v, *pool_, 0, 0, in_pool, from_pool, Isa());
  at::Tensor keys = at::empty({kKvHeads, 2 * kBlock, HeadDim()}, q.options());
  at::Tensor values = at::empty_like(keys);
  ASSERT_TRUE(RowAttentionApplies(keys, values, q, k, v));
  at::Tensor from_scratch = at::empty_like(from_pool);
  RowAttention(q, k, v, keys, values, 0, in_scratch, from_scratch, Isa());
  EXPECT_EQ(std::memcmp(from_pool.data_ptr(), from_scratch.data_ptr(), from_pool.nbytes()), 0);
  // A block table pointing past the scratch positions is refused, not read.
  const std::vector<int32_t> outside = {0, 2};
  EXPECT_THROW(RowAttention(q, k, v, keys, values, 0, {{0, 20, &outside}}, from_scratch, Isa()),
               c10::Error);
  EXPECT_FALSE(RowAttentionApplies(keys, values.narrow(1, 0, kBlock), q, k, v))
      << "keys and values of different sizes";
}

TEST(DecodeAttention, AppliesToFloatRowsOfHeadsOnTheCpu) {
  auto pool = KvBlockPool::Create({{at::Device(at::kCPU), "cpu"}}, kKvHeads, kHeadDim, 2,
                                  at::kFloat,
                                  std::make_shared<runtime::RuntimeAccounting>(
                                      std::vector<std::string>{"cpu"}));
  ASSERT_TRUE(pool.ok());
  const at::Tensor q = at::zeros({3, kHeads, kHeadDim});
  const at::Tensor kv = at::zeros({3, kKvHeads, kHeadDim});
  EXPECT_TRUE(DecodeAttentionApplies(**pool, 0, q, kv, kv));
  EXPECT_FALSE(DecodeAttentionApplies(**pool, 0, q.to(at::kDouble), kv, kv));
  EXPECT_FALSE(DecodeAttentionApplies(**pool, 0, q.transpose(0, 1), kv, kv))
      << "heads must be rows of head_dim";
  EXPECT_FALSE(DecodeAttentionApplies(**pool, 0, at::zeros({3, 5, kHeadDim}), kv, kv))
      << "5 query heads do not share 2 kv heads evenly";
  auto bf16 = KvBlockPool::Create({{at::Device(at::kCPU), "cpu"}}, kKvHeads, kHeadDim, 2,
                                  at::kBFloat16,
                                  std::make_shared<runtime::RuntimeAccounting>(
                                      std::vector<std::string>{"cpu"}));
  ASSERT_TRUE(bf16.ok());
  EXPECT_FALSE(DecodeAttentionApplies(**bf16, 0, q, kv, kv)) << "float rows, a BF16 pool";
  EXPECT_TRUE(DecodeAttentionApplies(**bf16, 0, q.to(at::kBFloat16), kv.to(at::kBFloat16),
                                     kv.to(at::kBFloat16)));
  EXPECT_FALSE(DecodeAttentionApplies(**pool, 0, q.to(at::kBFloat16), kv.to(at::kBFloat16),
                                      kv.to(at::kBFloat16)))
      << "BF16 rows, a float pool";
  auto f16 = KvBlockPool::Create({{at::Device(at::kCPU), "cpu"}}, kKvHeads, kHeadDim, 2,
                                 at::kHalf,
                                 std::make_shared<runtime::RuntimeAccounting>(
                                     std::vector<std::string>{"cpu"}));
  ASSERT_TRUE(f16.ok());
  EXPECT_FALSE(DecodeAttentionApplies(**f16, 0, q.to(at::kHalf), kv.to(at::kHalf),
                                      kv.to(at::kHalf)));
}

INSTANTIATE_TEST_SUITE_P(IsaAndDtype, DecodeAttentionTest,
                         ::testing::Values(Operands{VectorIsa::kNone, at::kFloat},
                                           Operands{VectorIsa::kAvx2, at::kFloat},
                                           Operands{VectorIsa::kNone, at::kBFloat16},
                                           Operands{VectorIsa::kAvx2, at::kBFloat16},
                                           // The AVX-512 kernel: one, four and eight vectors a
                                           // head; 20 is not whole vectors (the AVX2 kernel's).
                                           Operands{VectorIsa::kAvx512, at::kFloat, 16},
                                           Operands{VectorIsa::kAvx512, at::kFloat, 64},
                                           Operands{VectorIsa::kAvx512, at::kFloat, 128},
                                           Operands{VectorIsa::kAvx512, at::kFloat, kHeadDim},
                                           Operands{VectorIsa::kAvx512, at::kBFloat16, 64},
                                           Operands{VectorIsa::kAvx512, at::kBFloat16, 128},
                                           Operands{VectorIsa::kAvx512, at::kBFloat16, kHeadDim}),
                         [](const ::testing::TestParamInfo<Operands>& info) {
                           const VectorIsa isa = info.param.isa;
                           return std::string(isa == VectorIsa::kNone   ? "Plain"
                                              : isa == VectorIsa::kAvx2 ? "Avx2"
                                                                        : "Avx512") +
                                  (info.param.dtype == at::kBFloat16 ? "Bf16" : "F32") +
                                  "HeadDim" + std::to_string(info.param.head_dim);
                         });

TEST(DecodeAttention, SlotsOfARunOfPositionsAreEachPositionsSlotAcrossBlocksAndRings) {
  // Three blocks holding a window past 48 positions: the table wraps (a ring).
  const std::vector<int32_t> ring = {5, 2, 7};
  const DecodeRow row{0, 100, &ring};
  for (int64_t first : {int64_t{0}, int64_t{13}, int64_t{16}, int64_t{61}}) {
    const int64_t count = row.position - first + 1;
    std::vector<int64_t> slots(static_cast<size_t>(count), -1);
    SlotsOf(row, first, count, slots.data());
    for (int64_t j = 0; j < count; ++j) {
      ASSERT_EQ(slots[static_cast<size_t>(j)], SlotOf(row, first + j)) << first << " + " << j;
    }
  }
}

TEST(DecodeAttention, TheAvx512KernelTakesWholeVectorsUpTo128) {
  for (int64_t head_dim : {16, 64, 80, 128}) EXPECT_TRUE(Avx512AttendTakes(head_dim)) << head_dim;
  for (int64_t head_dim : {0, 20, 72, 144, 256}) EXPECT_FALSE(Avx512AttendTakes(head_dim)) << head_dim;
  // Prompts of any length attend row by row only where that kernel runs.
  EXPECT_TRUE(RowAttentionTakesAnyLength(64, VectorIsa::kAvx512));
  EXPECT_FALSE(RowAttentionTakesAnyLength(20, VectorIsa::kAvx512));
  EXPECT_FALSE(RowAttentionTakesAnyLength(64, VectorIsa::kAvx2));
  EXPECT_FALSE(RowAttentionTakesAnyLength(64, VectorIsa::kNone));
}

}  // namespace
}  // namespace placer::model
