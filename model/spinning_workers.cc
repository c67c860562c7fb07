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

// ticket_: generation (low 24 bits) | chunk count (20 bits) | next chunk (20 bits). A loop
// has at most about 2 · participants · (ln(tasks) + 1) chunks (ChunkStarts), far below 2^20.
constexpr int kIndexBits = 20;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr uint64_t kGenerationMask = (uint64_t{1} << 24) - 1;

uint64_t Ticket(uint64_t generation, int64_t chunks) {
  return ((generation & kGenerationMask) << (2 * kIndexBits)) |
         (static_cast<uint64_t>(chunks) << kIndexBits);
}
uint64_t GenerationOf(uint64_t ticket) { return ticket >> (2 * kIndexBits); }
int64_t ChunksOf(uint64_t ticket) { return static_cast<int64_t>((ticket >> kIndexBits) & kIndexMask); }
int64_t NextOf(uint64_t ticket) { return static_cast<int64_t>(ticket & kIndexMask); }

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
    helpers_.emplace_back([this, current] { HelperLoop(current); });
  }
}

void SpinningWorkers::ChunkStarts(int64_t tasks, int participants, std::vector<int64_t>* starts) {
  starts->clear();
  const int64_t share = 2 * static_cast<int64_t>(std::max(1, participants));
  for (int64_t start = 0; start < tasks;) {
    starts->push_back(start);
    start += std::max<int64_t>(1, (tasks - start + share - 1) / share);
  }
  starts->push_back(tasks);
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
  ChunkStarts(tasks, participants_, &chunk_starts_);
  const int64_t chunks = static_cast<int64_t>(chunk_starts_.size()) - 1;
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generation_.load() + 1;
  ticket_.store(Ticket(generation, chunks), std::memory_order_release);
  generation_.fetch_add(1);  // seq_cst: ordered against sleepers_ (no lost wake-up)
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  RunChunks(generation);
  for (int spins = 1; chunks_done_.load(std::memory_order_acquire) < chunks; ++spins) {
    Pause();
    if (spins % kPausesPerCheck == 0) std::this_thread::yield();
  }
  fn_ = nullptr;
  return true;
}

void SpinningWorkers::RunChunks(uint64_t generation) {
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  while (GenerationOf(ticket) == (generation & kGenerationMask) &&
         NextOf(ticket) < ChunksOf(ticket)) {
    if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      continue;  // `ticket` now holds the current value
    }
    // Holding an unfinished chunk of this loop: fn_ and chunk_starts_ are its own.
    const int64_t chunk = NextOf(ticket);
    (*fn_)(chunk_starts_[chunk], chunk_starts_[chunk + 1]);
    chunks_done_.fetch_add(1, std::memory_order_release);
    ticket = ticket_.load(std::memory_order_acquire);
  }
}

void SpinningWorkers::HelperLoop(uint64_t seen) {
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
    RunChunks(seen);
  }
}

}  // namespace placer::model
