// The staging pool behind prefetch: background staging on its own thread, never more blocks
// staged than slots, failures handed to the block that needed them.
#include "placement/weight_stager.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace placer::placement {
namespace {

BlockWeights Weights(size_t block) { return {at::full({4}, static_cast<float>(block))}; }

TEST(WeightStager, PrefetchStagesOnAnotherThreadAndAcquireWaitsForIt) {
  std::promise<void> release_copy;
  std::shared_future<void> copy_may_finish = release_copy.get_future().share();
  std::atomic<std::thread::id> staged_on{};
  RuntimeAccounting accounting({"cuda:0"});
  WeightStager stager(
      2,
      [&](size_t block, size_t) {
        staged_on = std::this_thread::get_id();
        copy_may_finish.wait();
        return Weights(block);
      },
      &accounting, "cuda:0");
  stager.Prefetch(3);
  // The caller is not blocked by the copy in flight...
  EXPECT_EQ(stager.staged_blocks(), 1u);
  EXPECT_EQ(accounting.Used("cuda:0", MemoryKind::kStaging), 0u);
  auto acquired = std::async(std::launch::async, [&] { return stager.Acquire(3, nullptr); });
  // ...and Acquire waits for it to finish.
  EXPECT_EQ(acquired.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  release_copy.set_value();
  std::shared_ptr<const BlockWeights> weights = acquired.get();
  EXPECT_NE(staged_on.load(), std::this_thread::get_id());
  EXPECT_EQ((*weights)[0][0].item<float>(), 3.0f);
  EXPECT_EQ(accounting.Used("cuda:0", MemoryKind::kStaging), 16u);
  stager.Release(3);
  EXPECT_EQ(accounting.Used("cuda:0", MemoryKind::kStaging), 0u);
  EXPECT_EQ(stager.staged_blocks(), 0u);
}

TEST(WeightStager, NeverStagesMoreBlocksThanSlots) {
  std::atomic<int> copies{0};
  WeightStager stager(
      2, [&](size_t block, size_t) { ++copies; return Weights(block); }, nullptr, "cuda:0");
  auto first = stager.Acquire(0, nullptr);
  stager.Prefetch(1);
  stager.Prefetch(2);  // no slot left: ignored, not queued
  auto second = stager.Acquire(1, nullptr);
  EXPECT_EQ(stager.staged_blocks(), 2u);
  stager.Release(0);
  // Block 2 was never prefetched, so acquiring it stages it now, evicting nothing in use.
  auto third = stager.Acquire(2, nullptr);
  EXPECT_EQ(stager.staged_blocks(), 2u);
  EXPECT_EQ(copies.load(), 3);
  EXPECT_EQ((*third)[0][0].item<float>(), 2.0f);
}

TEST(WeightStager, AnIdlePrefetchedBlockIsEvictedForTheBlockNeededNow) {
  std::set<size_t> staged;
  std::mutex mutex;
  WeightStager stager(
      1,
      [&](size_t block, size_t) {
        std::lock_guard<std::mutex> lock(mutex);
        staged.insert(block);
        return Weights(block);
      },
      nullptr, "cuda:0");
  stager.Prefetch(5);
  auto weights = stager.Acquire(6, nullptr);  // waits for 5 to land, evicts it, stages 6
  EXPECT_EQ((*weights)[0][0].item<float>(), 6.0f);
  EXPECT_EQ(stager.staged_blocks(), 1u);
}

TEST(WeightStager, AFailedCopyIsRethrownToTheBlockThatNeedsIt) {
  WeightStager stager(
      2,
      [](size_t block, size_t) -> BlockWeights {
        if (block == 1) TORCH_CHECK(false, "out of memory staging block ", block);
        return Weights(block);
      },
      nullptr, "cuda:0");
  stager.Prefetch(1);
  EXPECT_THROW(
      {
        try {
          stager.Acquire(1, nullptr);
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find("out of memory staging block 1"), std::string::npos);
          throw;
        }
      },
      c10::Error);
  EXPECT_EQ(stager.staged_blocks(), 0u) << "the failed slot is given back";
  EXPECT_EQ((*stager.Acquire(0, nullptr))[0][0].item<float>(), 0.0f);
}

TEST(WeightStager, BlocksStagedAtOnceOwnDifferentSlotsAndAReleasedSlotIsReused) {
  std::mutex mutex;
  std::map<size_t, size_t> slot_of_block;  // as the stage function was told
  WeightStager stager(
      2,
      [&](size_t block, size_t slot) {
        std::lock_guard<std::mutex> lock(mutex);
        slot_of_block[block] = slot;
        return Weights(block);
      },
      nullptr, "cuda:0");
  size_t first_slot = 9, second_slot = 9;
  auto first = stager.Acquire(0, nullptr, &first_slot);
  stager.Prefetch(1);
  auto second = stager.Acquire(1, nullptr, &second_slot);
  EXPECT_LT(first_slot, 2u);
  EXPECT_LT(second_slot, 2u);
  EXPECT_NE(first_slot, second_slot);
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(slot_of_block[0], first_slot);
    EXPECT_EQ(slot_of_block[1], second_slot);
  }
  stager.Release(0);
  size_t third_slot = 9;
  auto third = stager.Acquire(2, nullptr, &third_slot);
  EXPECT_EQ(third_slot, first_slot) << "block 2 takes the slot block 0 gave back";
  stager.Release(1);
  stager.Prefetch(3);
  size_t fourth_slot = 9;
  auto fourth = stager.Acquire(3, nullptr, &fourth_slot);
  EXPECT_EQ(fourth_slot, second_slot) << "a prefetch takes the free slot too";
}

}  // namespace
}  // namespace placer::placement
