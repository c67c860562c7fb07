#include "model/spinning_workers.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace placer::model {
namespace {

using Clock = std::chrono::steady_clock;

// Between two looks at the clock: pause instructions are cheap, reading the clock is not.
constexpr int kPausesPerCheck = 64;

void Pause() { _mm_pause(); }

}  // namespace

SpinningWorkers& SpinningWorkers::Shared() {
  // Never destroyed: helpers may still be asleep when static destructors run at exit.
  static auto* workers = new SpinningWorkers();
  return *workers;
}

SpinningWorkers::~SpinningWorkers() { StopHelpers(); }

void SpinningWorkers::StopHelpers() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  for (std::thread& helper : helpers_) helper.join();
  helpers_.clear();
  stop_.store(false);
}

void SpinningWorkers::Resize(int helpers) {
  if (static_cast<int>(helpers_.size()) == helpers) return;
  StopHelpers();
  participants_ = helpers + 1;
  // The generation is read here, not in the new thread: that thread may first run after the
  // next loop is posted, and would then wait for the one after it.
  const uint64_t current = generation_.load();
  for (int index = 1; index <= helpers; ++index) {
    helpers_.emplace_back([this, index, current] { HelperLoop(index, current); });
  }
}

bool SpinningWorkers::TryRun(int64_t tasks, const RangeFn& fn) {
  std::unique_lock<std::mutex> running(run_mutex_, std::try_to_lock);
  if (!running.owns_lock()) return false;
  Resize(std::max(0, at::get_num_threads() - 1));
  if (helpers_.empty() || tasks <= 1) {
    if (tasks > 0) fn(0, tasks);
    return true;
  }
  fn_ = &fn;
  tasks_ = tasks;
  remaining_.store(static_cast<int>(helpers_.size()));
  generation_.fetch_add(1);  // seq_cst: ordered against sleepers_ (no lost wake-up)
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  RunRange(0);
  for (int spins = 1; remaining_.load(std::memory_order_acquire) > 0; ++spins) {
    Pause();
    if (spins % kPausesPerCheck == 0) std::this_thread::yield();
  }
  fn_ = nullptr;
  return true;
}

void SpinningWorkers::RunRange(int participant) {
  const int64_t chunk = (tasks_ + participants_ - 1) / participants_;
  const int64_t begin = std::min(tasks_, participant * chunk);
  const int64_t end = std::min(tasks_, begin + chunk);
  if (begin < end) (*fn_)(begin, end);
}

void SpinningWorkers::HelperLoop(int index, uint64_t seen) {
  while (true) {
    // Spin (yielding the core to anyone runnable) for the next loop of this step...
    const Clock::time_point spin_until = Clock::now() + std::chrono::microseconds(kSpinMicroseconds);
    bool posted = false;
    for (int spins = 1; !stop_.load(std::memory_order_relaxed); ++spins) {
      if (generation_.load(std::memory_order_acquire) != seen) {
        posted = true;
        break;
      }
      Pause();
      if (spins % kPausesPerCheck == 0) {
        if (Clock::now() >= spin_until) break;
        std::this_thread::yield();
      }
    }
    // ...then sleep until one is posted.
    if (!posted) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1);  // seq_cst, before looking at generation_ again
      wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    RunRange(index);
    remaining_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace placer::model
