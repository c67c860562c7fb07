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
#include <unordered_map>
#include <vector>

namespace placer::model {

// The weight bytes a parallel loop streams through, first to last (its first weight's, for a
// loop over several), or none (a loop over activations).
struct StreamedWeight {
  const void* begin = nullptr;
  int64_t bytes = 0;
};

class SpinningWorkers {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;
  using Streamed = StreamedWeight;

  // The process's workers: the calling thread plus at::get_num_threads() - 1 helpers.
  static SpinningWorkers& Shared();

  ~SpinningWorkers();

  // Splits [0, tasks) into contiguous chunks (ChunkStarts), which the participants (the caller
  // and every helper) claim one at a time in order, and runs fn on each; returns when all are
  // done. A helper that is late (descheduled, still waking up) leaves its chunks to the others
  // instead of holding the loop up. Returns false, running nothing, when another thread is
  // using the workers (the caller then runs the loop some other way).
  //
  // A loop that names the weight bytes it streams also teaches the workers which weights come
  // next: a decode step multiplies the same weights in the same order every step, so after a
  // loop the helpers, idle while the caller does the serial work between two products
  // (norms, rotary, attention's setup, sampling), pull the start of the weight that followed it
  // last time into their caches (NextWeightPrefetch). Only prefetches: a wrong or stale guess
  // costs some bandwidth, never a result.
  bool TryRun(int64_t tasks, const RangeFn& fn, Streamed streamed = {});

  // What the helpers were last asked to prefetch after a loop (nothing before a successor is
  // known): the learned successor of the last loop that named its bytes.
  Streamed NextWeightPrefetch() const;

  // Most bytes a helper prefetches after one loop: about what one thread streams during the
  // serial work between two products of a small model's step, within its L2. (Measured:
  // bench/analysis.md, "Prefetching the next weight between products".)
  static constexpr int64_t kPrefetchBytes = int64_t{1} << 20;

  // On by default; off, the helpers only spin between loops (placer-bench-model decode
  // --no-weight-prefetch, to measure what it gives). Orders still get learned.
  void set_weight_prefetch(bool on);

  // Bytes the helpers have prefetched so far (counted per 4 KiB).
  int64_t prefetched_bytes() const;

  // Where TryRun's chunks start, plus `tasks` at the end: each chunk is 1/(2 · participants) of
  // the tasks not yet in a chunk (at least one task), so the first chunks are long streams
  // through the weights and the last ones single tasks, and participants finish together
  // instead of one waiting out another's long last chunk (guided self-scheduling; equal
  // chunks, 4 a participant, left ~3 % of a ~1.1B int4 decode step waiting: bench/analysis.md).
  static std::vector<int64_t> ChunkStarts(int64_t tasks, int participants);

  // How long a helper spins for the next loop before it sleeps.
  static constexpr int64_t kSpinMicroseconds = 1000;

 private:
  SpinningWorkers() = default;
  void Resize(int helpers);  // caller holds run_mutex_
  void StopHelpers();
  void HelperLoop(uint64_t seen);
  // Claims and runs chunks of loop `generation` until none is left.
  void RunChunks(uint64_t generation);
  // Records `streamed` as the successor of the previous named loop.
  void LearnOrder(Streamed streamed);
  // Between loops: the prefetch posted after the last one, stopped as soon as a loop is posted.
  void PrefetchWhileIdle(uint64_t seen);

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

  // Weight order, learned and read by the caller of TryRun only (under run_mutex_).
  std::unordered_map<const void*, Streamed> successor_;
  const void* last_streamed_ = nullptr;
  // The prefetch posted for the helpers: a job number and the range (read racily: a torn
  // range only prefetches other addresses, which never faults).
  std::atomic<uint64_t> prefetch_job_{0};
  std::atomic<const char*> prefetch_begin_{nullptr};
  std::atomic<int64_t> prefetch_bytes_{0};
  std::atomic<bool> weight_prefetch_{true};
  std::atomic<int64_t> prefetched_bytes_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

}  // namespace placer::model
