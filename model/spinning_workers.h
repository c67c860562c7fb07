// Helper threads for the many short parallel loops of a decode step, kept awake between them.
//
// A decode step calls ~60 matrix products of well under a millisecond each. Through ATen's
// OpenMP pool (passive wait, which placerd needs: bench/analysis.md) every one of them wakes
// a sleeping thread, and on this VM a wake-up costs ~100 us: 1-row decode took 15 ms instead
// of 9. These helpers instead spin (yielding the core) for a short while after each loop, so
// the next loop of the same step finds them awake, and sleep once the step is over.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace placer::model {

class SpinningWorkers {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  // The process's workers: the calling thread plus at::get_num_threads() - 1 helpers.
  static SpinningWorkers& Shared();

  ~SpinningWorkers();

  // Splits [0, tasks) into contiguous chunks (ChunkStarts), which the participants (the caller
  // and every helper) claim one at a time in order, and runs fn on each; returns when all are
  // done. A helper that is late (descheduled, still waking up) leaves its chunks to the others
  // instead of holding the loop up. Returns false, running nothing, when another thread is
  // using the workers (the caller then runs the loop some other way).
  bool TryRun(int64_t tasks, const RangeFn& fn);

  // Where TryRun's chunks start, plus `tasks` at the end: each chunk is 1/(2 · participants) of
  // the tasks not yet in a chunk (at least one task), so the first chunks are long streams
  // through the weights and the last ones single tasks, and participants finish together
  // instead of one waiting out another's long last chunk (guided self-scheduling; equal
  // chunks, 4 a participant, left ~3 % of a ~1.1B int4 decode step waiting: bench/analysis.md).
  // Written over *starts, whose capacity is kept: a decode step posts ~40 loops, and a fresh
  // vector for each was a heap block touched cold after the step's weights went through.
  static void ChunkStarts(int64_t tasks, int participants, std::vector<int64_t>* starts);

  // How long a helper spins for the next loop before it sleeps.
  static constexpr int64_t kSpinMicroseconds = 1000;

 private:
  SpinningWorkers() = default;
  void Resize(int helpers);  // caller holds run_mutex_
  void StopHelpers();
  void HelperLoop(uint64_t seen);
  // Claims and runs chunks of loop `generation` until none is left.
  void RunChunks(uint64_t generation);

  std::mutex run_mutex_;  // one loop at a time
  std::vector<std::thread> helpers_;

  // The posted loop; written only while no chunk of the previous one is unfinished, read
  // only by a participant holding one of its chunks.
  const RangeFn* fn_ = nullptr;
  std::vector<int64_t> chunk_starts_;  // chunk i is [chunk_starts_[i], chunk_starts_[i + 1])
  int participants_ = 1;

  std::atomic<uint64_t> generation_{0};
  // The posted loop's generation, chunk count and next unclaimed chunk in one word, so a
  // claim (compare-and-swap) can only take a chunk of the loop it looked at.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> chunks_done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

}  // namespace placer::model
