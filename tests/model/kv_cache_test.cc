// The paged KV cache: blocks are taken whole and given back, consecutive ones preferred, and a
// sequence whose blocks are scattered over the pool decodes to the same logits as the full
// forward pass, alone and inside a batch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "model/kv_block_pool.h"
#include "model/kv_cache.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using Blocks = std::vector<int32_t>;

std::shared_ptr<KvBlockPool> CpuPool(int64_t blocks,
                                     std::shared_ptr<runtime::RuntimeAccounting> accounting) {
  auto pool = KvBlockPool::Create({{at::Device(at::kCPU), "cpu"}, {at::Device(at::kCPU), "cpu"}},
                                  /*kv_heads=*/2, /*head_dim=*/4, blocks, at::kFloat,
                                  std::move(accounting));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

TEST(KvBlockPool, TakesWholeBlocksPrefersARunAndGivesThemBack) {
  auto accounting =
      std::make_shared<runtime::RuntimeAccounting>(std::vector<std::string>{"cpu"});
  auto pool = CpuPool(6, accounting);
  ASSERT_NE(pool, nullptr);
  // 2 layers x (keys + values) x 2 heads x 4 dims x 96 positions x 4 bytes.
  EXPECT_EQ(accounting->Used("cpu", runtime::MemoryKind::kKvCache), 2u * 2 * 2 * 4 * 96 * 4);
  EXPECT_EQ(*pool->Take(16), (Blocks{0}));
  EXPECT_EQ(*pool->Take(17), (Blocks{1, 2})) << "17 positions need a second block";
  EXPECT_EQ(*pool->Take(1), (Blocks{3}));
  EXPECT_EQ(accounting->KvBlocks("cpu"), std::make_pair(uint64_t{4}, uint64_t{2}));
  pool->Give({1, 2});
  // Free: 1, 2, 4, 5. Two blocks come from the first run; three cannot be consecutive.
  EXPECT_EQ(*pool->Take(32), (Blocks{1, 2}));
  pool->Give({1, 2});
  EXPECT_EQ(*pool->Take(48), (Blocks{1, 2, 4}));

  auto refused = pool->Take(64);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("1 free blocks of 6"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("needs 4"), std::string::npos) << refused.status();
  pool->Give({0, 1, 2, 3, 4});
  EXPECT_EQ(pool->blocks_free(), 6);
  pool.reset();
  EXPECT_EQ(accounting->Used("cpu", runtime::MemoryKind::kKvCache), 0u) << "freed with the pool";
}

// Keys/values whose every element is its position, for `tokens` positions from `start`:
// [kv_heads, tokens, head_dim] as a layer appends them.
at::Tensor PositionsAsValues(int64_t start, int64_t tokens) {
  return at::arange(start, start + tokens, at::kFloat).view({1, tokens, 1}).expand({2, tokens, 4});
}

// The positions a returned keys tensor holds, in order (PositionsAsValues in, so every
// element of a position's row is the position).
std::vector<int64_t> PositionsOf(const at::Tensor& keys) {
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < keys.size(1); ++i) {
    EXPECT_TRUE(at::equal(keys[0][i], keys[1][i]));
    positions.push_back(static_cast<int64_t>(keys[0][i][0].item<float>()));
  }
  return positions;
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> values;
  for (int64_t v = begin; v < end; ++v) values.push_back(v);
  return values;
}

TEST(KvCacheRing, OneWindowOfBlocksServesASequenceOfAnyLength) {
  auto pool = CpuPool(4, nullptr);
  ASSERT_NE(pool, nullptr);
  // Window 5 in one block of 16 positions, for a sequence of 100.
  auto blocks = pool->Take(16);
  ASSERT_TRUE(blocks.ok());
  KvCache cache(pool, *blocks, /*capacity=*/100, /*window=*/5);
  EXPECT_TRUE(cache.ring());
  auto step = [&](int64_t tokens) {
    cache.BeginStep(tokens);
    const at::Tensor k = PositionsAsValues(cache.length(), tokens);
    auto [keys, values] = cache.Append(0, k, k + 1000);
    auto seen = PositionsOf(keys);
    EXPECT_TRUE(at::equal(values, keys + 1000));
    cache.Commit(tokens);
    return seen;
  };
  // A prompt longer than the ring: its queries see their own keys from the step itself.
  EXPECT_EQ(step(20), Range(0, 20));
  // Then the 4 positions before each step (the first query's window) and the step's own,
  // across the ring's wrap (positions 32, 48, ... reuse the block).
  for (int64_t position = 20; position < 60; ++position) {
    ASSERT_EQ(step(1), Range(position - 4, position + 1)) << "position " << position;
  }
  EXPECT_EQ(step(7), Range(56, 67));
  EXPECT_EQ(step(1), Range(63, 68));
}

TEST(KvCacheRing, RefusesBlocksThatHoldNeitherTheSequenceNorItsWindow) {
  auto pool = CpuPool(4, nullptr);
  ASSERT_NE(pool, nullptr);
  auto blocks = pool->Take(16);
  ASSERT_TRUE(blocks.ok());
  EXPECT_THROW(KvCache(pool, *blocks, /*capacity=*/100, /*window=*/17), c10::Error);
  EXPECT_THROW(KvCache(pool, *blocks, /*capacity=*/100, /*window=*/0), c10::Error);
  pool->Give(*blocks);
}

struct Architecture {
  std::string name, writer_args;
};
void PrintTo(const Architecture& architecture, std::ostream* out) { *out << architecture.name; }

class ScatteredKvCache : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-kv-", getpid(), "-", GetParam().name);
    fs::remove_all(dir_);
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir_.string(), " ",
                                       GetParam().writer_args, " > /dev/null")
                              .c_str()),
              0);
    auto checkpoint = loader::Checkpoint::Open(dir_.string());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    // Room for two sequences of 48 positions: 6 blocks.
    auto model = LoadCausalLm(*checkpoint, {runtime::RuntimePlan::AllOnCpu(), nullptr,
                                            /*max_sequence_length=*/48, /*kv_cache_blocks=*/6});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Logits of every position of `tokens` from one fresh forward pass.
  Logits Full(const std::vector<int32_t>& tokens) {
    auto logits = model_->Forward(tokens, /*all_positions=*/true);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? *logits : Logits{};
  }

  static void ExpectRow(const std::vector<float>& got, size_t got_row, const Logits& want,
                        size_t want_row, const std::string& what) {
    const size_t vocab = static_cast<size_t>(want.shape[1]);
    for (size_t v = 0; v < vocab; ++v) {
      const float expected = want.values[want_row * vocab + v];
      ASSERT_NEAR(got[got_row * vocab + v], expected, 1e-4f * std::max(1.0f, std::abs(expected)))
          << what << ", logit " << v;
    }
  }

  fs::path dir_;
  std::unique_ptr<CausalLm> model_;
};

TEST_P(ScatteredKvCache, DecodesToTheLogitsOfTheFullForward) {
  std::vector<std::unique_ptr<SequenceCache>> one_block;
  for (int i = 0; i < 6; ++i) one_block.push_back(*model_->NewSequence(16));
  EXPECT_EQ(model_->NewSequence(1).status().code(), absl::StatusCode::kResourceExhausted)
      << "all six blocks are taken";
  // Free blocks 0, 2 and 4: a sequence of 48 positions gets them, scattered.
  one_block[0].reset();
  one_block[2].reset();
  one_block[4].reset();
  auto scattered = model_->NewSequence(48);
  ASSERT_TRUE(scattered.ok()) << scattered.status();
  EXPECT_EQ(dynamic_cast<KvCache&>(**scattered).blocks(), (Blocks{0, 2, 4}));

  std::vector<int32_t> tokens, neighbour_tokens;
  for (int t = 0; t < 40; ++t) tokens.push_back((t * 29 + 3) % 300);
  for (int t = 0; t < 12; ++t) neighbour_tokens.push_back((t * 13 + 5) % 300);
  const Logits want = Full(tokens);
  const Logits neighbour_want = Full(neighbour_tokens);
  // A prompt chunk crossing a block boundary, then one token at a time; the sequence in
  // block 1 runs in the same passes for its first steps.
  auto& neighbour = *one_block[1];
  auto first = model_->ExtendBatch({{scattered->get(), {tokens.begin(), tokens.begin() + 20}},
                                    {&neighbour, {neighbour_tokens.begin(), neighbour_tokens.begin() + 4}}});
  ASSERT_TRUE(first.ok()) << first.status();
  ExpectRow(first->values, 0, want, 19, "prompt chunk");
  ExpectRow(first->values, 1, neighbour_want, 3, "neighbour's chunk");
  for (size_t t = 20; t < tokens.size(); ++t) {
    std::vector<CausalLm::SequenceStep> batch{{scattered->get(), {tokens[t]}}};
    const size_t n = t - 16;
    if (n < neighbour_tokens.size()) batch.push_back({&neighbour, {neighbour_tokens[n]}});
    auto step = model_->ExtendBatch(batch);
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectRow(step->values, 0, want, t, absl::StrCat("position ", t));
    if (n < neighbour_tokens.size()) ExpectRow(step->values, 1, neighbour_want, n, "neighbour");
  }
  EXPECT_EQ((*scattered)->length(), 40);
  auto beyond = model_->Extend(**scattered, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument)
      << "the sequence's 48 positions are exhausted: " << beyond.status();
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ScatteredKvCache,
    ::testing::Values(Architecture{"llama", "--arch llama --layers 2 --hidden 64 --heads 4 "
                                            "--kv-heads 2 --intermediate 96 --vocab 300 --seed 5"},
                      Architecture{"gpt2", "--arch gpt2 --layers 2 --hidden 64 --heads 4 "
                                           "--vocab 300 --seed 6"}),
    [](const ::testing::TestParamInfo<Architecture>& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
