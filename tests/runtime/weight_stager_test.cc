// The staging pool behind prefetch: background staging on its own thread, running ahead of
// compute as far as two slots allow, never two live blocks in the same bytes, a slot reported
// empty only when nothing lives or is copied in it, failures handed to the block that needed
// them.
#include "runtime/weight_stager.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace placer::runtime {
namespace {

BlockWeights Weights(size_t block) { return {at::full({4}, static_cast<float>(block))}; }

// Blocks 0..count-1 of `bytes` each, in a cycle.
WeightStager::Sequence Cycle(size_t count, uint64_t bytes) {
  return {[bytes](size_t) { return bytes; }, [count](size_t block) { return (block + 1) % count; },
          nullptr};
}

bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 500; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return condition();
}

TEST(WeightStager, PrefetchStagesOnAnotherThreadAndAcquireWaitsForIt) {
  std::promise<void> release_copy;
  std::shared_future<void> copy_may_finish = release_copy.get_future().share();
  std::atomic<std::thread::id> staged_on{};
  RuntimeAccounting accounting({"cuda:0"});
  // One block per slot: room for block 3 and block 4 is reserved, 3 is copied first.
  WeightStager stager(
      2, 16, Cycle(10, 16),
      [&](size_t block, StagingRegion, bool background) {
        EXPECT_TRUE(background) << "a prefetched block is copied while compute runs";
        staged_on = std::this_thread::get_id();
        copy_may_finish.wait();
        return Weights(block);
      },
      &accounting, "cuda:0");
  stager.Prefetch(3);
  // The caller is not blocked by the copy in flight, which runs on the stager's thread...
  EXPECT_TRUE(Eventually([&] { return staged_on.load() != std::thread::id(); }));
  EXPECT_NE(staged_on.load(), std::this_thread::get_id());
  EXPECT_EQ(stager.staged_blocks(), 2u);
  EXPECT_EQ(accounting.Used("cuda:0", MemoryKind::kStaging), 0u);
  auto acquired = std::async(std::launch::async, [&] { return stager.Acquire(3, nullptr); });
  // ...and Acquire waits for it to finish.
  EXPECT_EQ(acquired.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  release_copy.set_value();
  std::shared_ptr<const BlockWeights> weights = acquired.get();
  EXPECT_EQ((*weights)[0][0].item<float>(), 3.0f);
  EXPECT_TRUE(Eventually([&] { return accounting.Used("cuda:0", MemoryKind::kStaging) == 32u; }))
      << "blocks 3 and 4, 16 bytes each, charged once copied";
  stager.Release(3);
  // Block 3's slot is free again: block 5 follows 4 into it.
  EXPECT_TRUE(Eventually([&] { return accounting.Used("cuda:0", MemoryKind::kStaging) == 32u &&
                                      stager.staged_blocks() == 2; }));
  EXPECT_EQ((*stager.Acquire(4, nullptr))[0][0].item<float>(), 4.0f);
}

TEST(WeightStager, RunsAheadAsFarAsTheSlotsAllowAndRefillsASlotOnlyOnceItIsEmpty) {
  std::mutex mutex;
  std::vector<std::pair<size_t, StagingRegion>> copies;  // as the stage function was called
  auto copied = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return copies;
  };
  // Two slots of 30 bytes, blocks of 10: three blocks per slot.
  WeightStager stager(
      2, 30, Cycle(10, 10),
      [&](size_t block, StagingRegion region, bool) {
        std::lock_guard<std::mutex> lock(mutex);
        copies.emplace_back(block, region);
        return Weights(block);
      },
      nullptr, "cuda:0");
  stager.Prefetch(0);
  ASSERT_TRUE(Eventually([&] { return copied().size() == 6; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(copied().size(), 6u) << "blocks 0-5 fill both slots; nothing more fits";
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(copied()[i].first, i);
    EXPECT_EQ(copied()[i].second.slot, i / 3) << "block " << i;
    EXPECT_EQ(copied()[i].second.offset, 10 * (i % 3)) << "block " << i;
  }
  for (size_t block = 0; block < 2; ++block) {
    StagingRegion region;
    auto weights = stager.Acquire(block, nullptr, &region);
    EXPECT_EQ((*weights)[0][0].item<float>(), static_cast<float>(block));
    EXPECT_EQ(region.slot, 0u);
    stager.Release(block);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(copied().size(), 6u) << "block 2 still lives in slot 0: its bytes are not reused";
  auto third = stager.Acquire(2, nullptr);
  stager.Release(2);
  ASSERT_TRUE(Eventually([&] { return copied().size() == 9; }));
  for (size_t i = 6; i < 9; ++i) {
    EXPECT_EQ(copied()[i].first, i);
    EXPECT_EQ(copied()[i].second.slot, 0u);
    EXPECT_EQ(copied()[i].second.offset, 10 * (i % 3));
  }
}

TEST(WeightStager, LiveBlocksNeverShareBytesAndStayWithinTheSlots) {
  // Blocks of random sizes up to a slot, passes through them in order with random compute
  // times, the stager racing ahead: every copy must land in bytes no live block holds.
  constexpr uint64_t kSlotBytes = 100;
  constexpr size_t kBlocks = 7;
  std::mt19937 random(7);
  std::vector<uint64_t> sizes(kBlocks);
  for (uint64_t& size : sizes) size = 1 + random() % kSlotBytes;
  sizes[3] = kSlotBytes;  // the largest block fills a slot
  std::mutex mutex;
  std::map<size_t, StagingRegion> live;
  std::vector<std::string> violations;
  size_t stage_calls = 0, emptied_calls = 0;
  WeightStager stager(
      2, kSlotBytes,
      {[&](size_t block) { return sizes[block]; },
       [&](size_t block) { return (block + 1) % kBlocks; },
       [&](size_t slot) {
         // Where the GPU fence is recorded: nothing may live or be copied in the slot.
         std::lock_guard<std::mutex> lock(mutex);
         ++emptied_calls;
         for (const auto& [block, where] : live) {
           if (where.slot == slot) {
             violations.push_back("slot " + std::to_string(slot) + " emptied under block " +
                                  std::to_string(block));
           }
         }
       }},
      [&](size_t block, StagingRegion region, bool) {
        std::lock_guard<std::mutex> lock(mutex);
        ++stage_calls;
        if (region.slot >= 2 || region.offset + sizes[block] > kSlotBytes) {
          violations.push_back("block " + std::to_string(block) + " outside the slots");
        }
        for (const auto& [other, where] : live) {
          const bool overlap = where.slot == region.slot &&
                               where.offset < region.offset + sizes[block] &&
                               region.offset < where.offset + sizes[other];
          // A slot is refilled from its start only when nothing lives in it (the fence rule).
          if (overlap || (region.offset == 0 && where.slot == region.slot)) {
            violations.push_back("block " + std::to_string(block) + " on block " +
                                 std::to_string(other));
          }
        }
        live[block] = region;
        return Weights(block);
      },
      nullptr, "cuda:0");
  for (int pass = 0; pass < 40; ++pass) {
    for (size_t block = 0; block < kBlocks; ++block) {
      auto weights = stager.Acquire(block, nullptr);
      ASSERT_EQ((*weights)[0][0].item<float>(), static_cast<float>(block));
      stager.Prefetch((block + 1) % kBlocks);
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 300));
      {
        std::lock_guard<std::mutex> lock(mutex);
        live.erase(block);  // before Release: the stager may reuse the bytes right after
      }
      stager.Release(block);
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_TRUE(violations.empty()) << violations.front();
  EXPECT_GE(stage_calls, 40 * kBlocks);
  EXPECT_LE(stage_calls, 40 * kBlocks + kBlocks) << "every block copied once per pass";
  EXPECT_GE(emptied_calls, 40u) << "each slot empties at least once a pass";
}

TEST(WeightStager, WithoutPrefetchAcquireStagesOnTheCallersThreadAndNothingElse) {
  std::atomic<int> copies{0};
  std::atomic<std::thread::id> staged_on{};
  WeightStager stager(
      2, 16, Cycle(4, 16),
      [&](size_t block, StagingRegion, bool background) {
        EXPECT_FALSE(background) << "compute waits for this copy";
        ++copies;
        staged_on = std::this_thread::get_id();
        return Weights(block);
      },
      nullptr, "cuda:0");
  for (size_t block = 0; block < 4; ++block) {
    auto weights = stager.Acquire(block, nullptr);
    EXPECT_EQ((*weights)[0][0].item<float>(), static_cast<float>(block));
    EXPECT_EQ(staged_on.load(), std::this_thread::get_id());
    stager.Release(block);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(copies.load(), 4);
  EXPECT_EQ(stager.staged_blocks(), 0u);
}

TEST(WeightStager, BlocksStagedAheadButNotNeededAreDropped) {
  std::promise<void> release_copy;
  std::shared_future<void> copy_may_finish = release_copy.get_future().share();
  WeightStager stager(
      1, 16, Cycle(10, 16),
      [&](size_t block, StagingRegion, bool) {
        copy_may_finish.wait();
        return Weights(block);
      },
      nullptr, "cuda:0");
  stager.Prefetch(5);
  ASSERT_TRUE(Eventually([&] { return stager.staged_blocks() == 1; }));
  auto needed = std::async(std::launch::async, [&] { return stager.Acquire(8, nullptr); });
  release_copy.set_value();
  // Waits for block 5's copy to land, drops it, stages 8 in its room.
  EXPECT_EQ((*needed.get())[0][0].item<float>(), 8.0f);
  EXPECT_EQ(stager.staged_blocks(), 1u);
}

TEST(WeightStager, AcquiringALaterBlockDropsTheSkippedOnes) {
  WeightStager stager(
      2, 10, Cycle(10, 5), [](size_t block, StagingRegion, bool) { return Weights(block); },
      nullptr, "cuda:0");
  stager.Prefetch(0);  // blocks 0-3, two per slot
  ASSERT_TRUE(Eventually([&] { return stager.staged_blocks() == 4; }));
  auto weights = stager.Acquire(2, nullptr);
  EXPECT_EQ((*weights)[0][0].item<float>(), 2.0f);
  EXPECT_EQ(stager.staged_blocks(), 2u) << "0 and 1 were skipped: dropped; 2 and 3 stay";
}

TEST(WeightStager, AFailedCopyIsRethrownToTheBlockThatNeedsIt) {
  WeightStager stager(
      2, 16, Cycle(4, 16),
      [](size_t block, StagingRegion, bool) -> BlockWeights {
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
  // The failed block's room is given back: block 2 is (or gets) staged and acquired.
  EXPECT_EQ((*stager.Acquire(2, nullptr))[0][0].item<float>(), 2.0f);
}

TEST(WeightStager, ABlockLargerThanASlotIsAnErrorNotAHang) {
  WeightStager stager(
      2, 16, {[](size_t block) -> uint64_t { return block == 2 ? 17 : 16; },
              [](size_t block) { return (block + 1) % 4; }, nullptr},
      [](size_t block, StagingRegion, bool) { return Weights(block); }, nullptr, "cuda:0");
  stager.Prefetch(1);  // 1 in slot 0, 2 refused, 3 in slot 1
  try {
    stager.Acquire(2, nullptr);
    ADD_FAILURE() << "staged a block that does not fit a slot";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("block 2 needs 17 bytes, more than a staging slot's 16"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ((*stager.Acquire(3, nullptr))[0][0].item<float>(), 3.0f);
}

}  // namespace
}  // namespace placer::runtime
