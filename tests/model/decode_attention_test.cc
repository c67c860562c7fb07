// DecodeAttention: the decode rows of a step over the paged pool give what CausalAttention
// gives over the same keys (scattered blocks, grouped-query heads, sliding windows, head
// sizes that are not a multiple of the vector width), store the new keys and values in their
// blocks, and give a row the same bits alone as inside any batch.
#include "model/decode_attention.h"

#include <gtest/gtest.h>

#include <cstring>

#include "model/tensor_ops.h"

namespace placer::model {
namespace {

constexpr int64_t kHeads = 6;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 20;  // 2 vectors of 8 and a tail of 4
constexpr int64_t kBlock = KvBlockPool::kBlockPositions;

class DecodeAttentionTest : public ::testing::TestWithParam<VectorIsa> {
 protected:
  void SetUp() override {
    if (GetParam() != VectorIsa::kNone && DetectVectorIsa() == VectorIsa::kNone) {
      GTEST_SKIP() << "this CPU has no AVX2";
    }
    auto pool = KvBlockPool::Create({{at::Device(at::kCPU), "cpu"}}, kKvHeads, kHeadDim,
                                    /*blocks=*/8, at::kFloat,
                                    std::make_shared<runtime::RuntimeAccounting>(
                                        std::vector<std::string>{"cpu"}));
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *pool;
    at::manual_seed(7);
    pool_->keys(0).normal_();
    pool_->values(0).normal_();
  }

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
  const at::Tensor q = at::randn({rows, kHeads, kHeadDim});
  // Row stride wider than a row, as a view into a fused q/k/v projection has.
  const at::Tensor kv = at::randn({rows, 2, kKvHeads, kHeadDim});
  const at::Tensor k = kv.select(1, 0);
  const at::Tensor v = kv.select(1, 1);
  for (int64_t window : {int64_t{0}, int64_t{7}}) {
    SCOPED_TRACE(window);
    std::vector<DecodeRow> decode;
    for (int64_t r = 0; r < rows; ++r) decode.push_back({r, positions[r], &tables[r]});
    at::Tensor out = at::full({rows, kHeads * kHeadDim}, 123.0f);
    DecodeAttention(q, k, v, *pool_, 0, window, decode, out, GetParam());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t length = positions[r] + 1;
      const at::Tensor keys = Gather(pool_->keys(0), tables[r], length);
      const at::Tensor values = Gather(pool_->values(0), tables[r], length);
      // The new token's key and value went to its slot.
      EXPECT_TRUE(at::equal(keys.select(1, positions[r]), k[r])) << "row " << r;
      EXPECT_TRUE(at::equal(values.select(1, positions[r]), v[r])) << "row " << r;
      const at::Tensor want = CausalAttention(q[r].unsqueeze(1), keys, values, window)
                                  .transpose(0, 1)
                                  .reshape({kHeads * kHeadDim});
      EXPECT_TRUE(at::allclose(out[r], want, 1e-5, 1e-5))
          << "row " << r << " max diff " << (out[r] - want).abs().max().item<float>();
    }
  }
}

TEST_P(DecodeAttentionTest, WindowChangesTheResultOnlyPastIt) {
  const std::vector<int32_t> table = {1, 7};
  const at::Tensor q = at::randn({1, kHeads, kHeadDim});
  const at::Tensor k = at::randn({1, kKvHeads, kHeadDim});
  const at::Tensor v = at::randn({1, kKvHeads, kHeadDim});
  auto attend = [&](int64_t position, int64_t window) {
    at::Tensor out = at::empty({1, kHeads * kHeadDim});
    DecodeAttention(q, k, v, *pool_, 0, window, {{0, position, &table}}, out, GetParam());
    return out;
  };
  // Window wider than what is cached: the same bits as no window.
  EXPECT_TRUE(at::equal(attend(5, 0), attend(5, 6)));
  EXPECT_FALSE(at::allclose(attend(25, 0), attend(25, 4)));
  // Window 1: each query head sees only the new token, so it gets its value back.
  const at::Tensor only_new = attend(25, 1).view({kKvHeads, kHeads / kKvHeads, kHeadDim});
  for (int64_t g = 0; g < kHeads / kKvHeads; ++g) {
    EXPECT_TRUE(at::allclose(only_new.select(1, g), v[0], 1e-6, 1e-6));
  }
}

TEST_P(DecodeAttentionTest, RowIsTheSameBitsAloneAndInAnyBatch) {
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2}, {3}, {4, 6}, {5, 7}};
  const std::vector<int64_t> positions = {37, 9, 30, 17};
  const at::Tensor q = at::randn({4, kHeads, kHeadDim});
  const at::Tensor k = at::randn({4, kKvHeads, kHeadDim});
  const at::Tensor v = at::randn({4, kKvHeads, kHeadDim});
  at::Tensor alone = at::empty({4, kHeads * kHeadDim});
  for (int64_t r = 0; r < 4; ++r) {
    DecodeAttention(q, k, v, *pool_, 0, 0, {{r, positions[r], &tables[r]}}, alone, GetParam());
  }
  at::Tensor batch = at::empty({4, kHeads * kHeadDim});
  DecodeAttention(q, k, v, *pool_, 0, 0,
                  {{3, positions[3], &tables[3]}, {1, positions[1], &tables[1]},
                   {0, positions[0], &tables[0]}, {2, positions[2], &tables[2]}},
                  batch, GetParam());
  EXPECT_EQ(std::memcmp(alone.data_ptr<float>(), batch.data_ptr<float>(),
                        sizeof(float) * alone.numel()),
            0);
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
  EXPECT_FALSE(DecodeAttentionApplies(**bf16, 0, q, kv, kv));
}

INSTANTIATE_TEST_SUITE_P(Isa, DecodeAttentionTest,
                         ::testing::Values(VectorIsa::kNone, VectorIsa::kAvx2),
                         [](const ::testing::TestParamInfo<VectorIsa>& info) {
                           return info.param == VectorIsa::kNone ? "Plain" : "Avx2";
                         });

}  // namespace
}  // namespace placer::model
