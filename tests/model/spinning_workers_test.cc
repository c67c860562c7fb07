// The helpers of SpinningWorkers: every task of every loop runs exactly once, on as many
// threads as ATen is set to, whether the helpers were spinning or asleep when the loop came,
// and a second caller at the same time is refused rather than mixed in.
#include "model/spinning_workers.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace placer::model {
namespace {

// Runs one loop of `tasks` and checks each index was visited once.
void ExpectEveryTaskOnce(int64_t tasks) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(tasks));
  ASSERT_TRUE(SpinningWorkers::Shared().TryRun(tasks, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
    // Long enough that one participant cannot take every range before the others start.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }));
  for (int64_t i = 0; i < tasks; ++i) {
    ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << "task " << i << " of " << tasks;
  }
}

class SpinningWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override { threads_ = at::get_num_threads(); }
  void TearDown() override { at::set_num_threads(threads_); }
  int threads_ = 1;
};

TEST_F(SpinningWorkersTest, EveryTaskOnceWhetherHelpersSpinOrSleep) {
  at::set_num_threads(2);
  for (int64_t tasks : {1, 2, 3, 7, 64, 500}) ExpectEveryTaskOnce(tasks);
  for (int loop = 0; loop < 2000; ++loop) {  // back to back: helpers still spinning
    std::atomic<int64_t> sum{0};
    ASSERT_TRUE(SpinningWorkers::Shared().TryRun(10, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sum.fetch_add(i + 1);
    }));
    ASSERT_EQ(sum.load(), 55) << "loop " << loop;
  }
  for (int loop = 0; loop < 5; ++loop) {  // helpers asleep by now
    std::this_thread::sleep_for(std::chrono::microseconds(3 * SpinningWorkers::kSpinMicroseconds));
    ExpectEveryTaskOnce(9);
  }
}

TEST(SpinningWorkersChunks, CoverTheTasksInShrinkingChunksDownToSingleTasks) {
  for (int participants : {1, 2, 3, 8}) {
    for (int64_t tasks : {1, 2, 3, 4, 5, 31, 32, 88, 500, 100000}) {
      SCOPED_TRACE(testing::Message() << tasks << " tasks, " << participants << " participants");
      std::vector<int64_t> starts = {-1, -1};  // written over, not appended to
      SpinningWorkers::ChunkStarts(tasks, participants, &starts);
      ASSERT_GE(starts.size(), 2u);
      EXPECT_EQ(starts.front(), 0);
      EXPECT_EQ(starts.back(), tasks);
      const int64_t share = 2 * participants;
      // The first chunk is its share of all the tasks, the last a single task.
      EXPECT_EQ(starts[1], (tasks + share - 1) / share);
      EXPECT_EQ(starts[starts.size() - 1] - starts[starts.size() - 2], 1);
      for (size_t i = 1; i + 1 < starts.size(); ++i) {
        const int64_t size = starts[i + 1] - starts[i];
        ASSERT_GE(size, 1);
        ASSERT_LE(size, starts[i] - starts[i - 1]) << "chunk " << i << " grew";
      }
      // Few claims even for many tasks: about 2 P (ln(tasks) + 1).
      EXPECT_LE(static_cast<double>(starts.size() - 1),
                share * (std::log(static_cast<double>(tasks)) + 1) + share);
    }
  }
}

TEST_F(SpinningWorkersTest, UsesAsManyThreadsAsAtenIsSetTo) {
  // A helper the scheduler runs late leaves its chunks to the others (as it should), so on a
  // loaded machine a loop of short tasks can finish on the caller alone: each chunk here waits,
  // up to a deadline far past any scheduling delay, until `threads` threads have joined the loop.
  for (int threads : {3, 1, 2}) {
    at::set_num_threads(threads);
    std::mutex mutex;
    std::set<std::thread::id> seen;
    std::vector<int> visits(12, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    ASSERT_TRUE(SpinningWorkers::Shared().TryRun(12, [&](int64_t begin, int64_t end) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        seen.insert(std::this_thread::get_id());
        for (int64_t task = begin; task < end; ++task) ++visits[static_cast<size_t>(task)];
      }
      while (std::chrono::steady_clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (static_cast<int>(seen.size()) >= threads) break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }));
    EXPECT_EQ(static_cast<int>(seen.size()), threads) << "at::set_num_threads(" << threads << ")";
    EXPECT_EQ(visits, std::vector<int>(12, 1)) << "each task once, at " << threads << " threads";
  }
}

TEST_F(SpinningWorkersTest, ASecondCallerAtTheSameTimeIsRefused) {
  at::set_num_threads(2);
  std::atomic<bool> inside{false}, release{false};
  std::thread first([&] {
    ASSERT_TRUE(SpinningWorkers::Shared().TryRun(2, [&](int64_t, int64_t) {
      inside.store(true);
      while (!release.load()) std::this_thread::yield();
    }));
  });
  while (!inside.load()) std::this_thread::yield();
  bool ran = false;
  EXPECT_FALSE(SpinningWorkers::Shared().TryRun(4, [&](int64_t, int64_t) { ran = true; }));
  EXPECT_FALSE(ran);
  release.store(true);
  first.join();
  ExpectEveryTaskOnce(4);  // and usable again afterwards
}

}  // namespace
}  // namespace placer::model
