// The rows of a pass as another stage receives them: what the leader encodes decodes to the
// same sequences over the same KV blocks, and a layout that does not fit (from a confused or
// hostile peer) is refused naming the sequence and field, never read out of bounds.
#include "model/stage_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace placer::model {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<KvBlockPool> Pool(int64_t blocks) {
  std::vector<KvBlockPool::LayerPlacement> layers = {{at::Device(at::kCPU), "cpu", true},
                                                     {at::Device(at::kCPU), "cpu", false}};
  auto pool = KvBlockPool::Create(layers, 2, 8, blocks, at::kFloat, nullptr);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return *pool;
}

TEST(StageLayoutTest, TheLeadersRowsDecodeToTheSameSequencesAndBlocks) {
  auto pool = Pool(8);
  auto blocks = pool->Take(40);  // 3 blocks
  ASSERT_TRUE(blocks.ok());
  KvCache cache(pool, *blocks, 48);
  cache.BeginStep(5);
  cache.Commit(5);  // 5 positions held
  const std::vector<SequenceRows> rows = {{0, 1, 5, &cache}, {1, 3, 0, nullptr}};
  const std::vector<int64_t> layout = EncodeStageLayout(rows);
  auto decoded = DecodeStageLayout(layout, 4, pool, 0);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->sequences.size(), 2u);
  EXPECT_EQ(decoded->sequences[0].start, 5);
  ASSERT_NE(decoded->sequences[0].cache, nullptr);
  EXPECT_EQ(decoded->sequences[0].cache->length(), 5);
  EXPECT_EQ(decoded->sequences[0].cache->capacity(), 48);
  EXPECT_EQ(static_cast<const KvCache*>(decoded->sequences[0].cache)->blocks(), *blocks);
  EXPECT_EQ(decoded->sequences[1].cache, nullptr);
  EXPECT_EQ(decoded->sequences[1].length, 3);
  // A mirror never gives the leader's blocks back to the pool.
  const int64_t free_before = pool->blocks_free();
  decoded = absl::InternalError("dropped");
  EXPECT_EQ(pool->blocks_free(), free_before);
}

TEST(StageLayoutTest, LayoutsThatDoNotFitAreRefused) {
  auto pool = Pool(4);
  struct Case {
    std::vector<int64_t> layout;
    int64_t rows;
    std::string why;
  };
  const std::vector<Case> cases = {
      {{}, 1, "no sequences"},
      {{2, 0, 1, 0, -1, 0}, 1, "more than rows"},
      {{1, 0, 1}, 1, "sequence 0 is cut short"},
      {{1, 1, 1, 0, -1, 0}, 2, "sequence 0: rows 1+1"},
      {{1, 0, 3, 0, -1, 0}, 2, "do not fit 2 rows"},
      {{1, 0, 1, 0, 16, 2, 0}, 1, "sequence 0: 2 KV blocks"},
      {{1, 0, 1, 0, 16, 1, 9}, 1, "KV block 9 outside the pool of 4"},
      {{1, 0, 1, 0, 16, 1, -1}, 1, "KV block -1"},
      {{1, 0, 1, 16, 16, 1, 0}, 1, "capacity 16 for 16 held positions"},
      {{1, 0, 1, 0, 64, 1, 0}, 1, "capacity 64 for 16 held positions"},
      {{1, 0, 1, 0, -1, 0, 5}, 1, "cover 1 of 1 rows"},
      {{1, 0, 1, 0, 16, 99999999999, 0}, 1, "99999999999 KV blocks"},
  };
  for (const Case& c : cases) {
    auto decoded = DecodeStageLayout(c.layout, c.rows, pool, 0);
    ASSERT_FALSE(decoded.ok()) << c.why;
    EXPECT_THAT(decoded.status().message(), HasSubstr(c.why));
  }
}

}  // namespace
}  // namespace placer::model
