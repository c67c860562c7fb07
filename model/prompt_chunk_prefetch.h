// What the prompt-chunk kernels' tiles (prompt_chunk_linear.cc, prompt_chunk_bf16.cc) prefetch
// while they multiply, so that the next weight bytes come from memory during arithmetic instead
// of stalling the code that reads them.
//
// Dense weights: the next tile's rows, read by the next tile straight from memory. Weights
// given a task's rows at a time by a row source (a packed weight unpacked into the thread's
// buffer): the next tile's rows are already in the cache (the source just wrote them), but the
// source's next call reads the next task's packed bytes cold; where the source says which bytes
// it reads (RowSourceBytes), the first block's tiles fetch those instead, each tile its share.
// (small preset, --quantize int4, 64-token prefill: unpacking's samples 7.6 % -> 5.0 %, ~5 %
// of the prefill, bench/analysis.md.) Header-only: used inside the kernels' tile loops.
#pragma once

#include <algorithm>
#include <cstdint>

namespace placer::model {

// The bytes a row source reads weight row r from: row_bytes of them at bytes + r * row_bytes.
struct RowSourceBytes {
  const uint8_t* bytes = nullptr;
  int64_t row_bytes = 0;
};

// One tile's prefetches: at input step k (0 .. steps - 1) the line holding from + k * bytes /
// steps, so `bytes` bytes are spread evenly over the tile's steps (256ths of a byte per step:
// no division in the loop). A prefetch never faults: past-the-end lines are harmless.
class PrefetchStream {
 public:
  PrefetchStream(const void* from, int64_t bytes, int64_t steps)
      : from_(static_cast<const char*>(from)), step_256_(steps > 0 ? bytes * 256 / steps : 0) {}

  const char* LineAt(int64_t k, int64_t extra = 0) const {
    return from_ + ((((k * step_256_) >> 8) + extra) & ~int64_t{63});
  }

 private:
  const char* from_;
  int64_t step_256_;
};

// The streams of one task's tiles (weight rows [n0, n1), T a tile, `steps` input steps a tile)
// against one block of inputs.
class TaskPrefetches {
 public:
  // dense_rows: where the tiles read row n0 (dense_row_bytes a row, rows in order); source /
  // out: where a row source reads its rows (none: bytes null) and the weight's row count.
  TaskPrefetches(const char* dense_rows, int64_t dense_row_bytes, int64_t n0, int64_t n1, int64_t t,
                 int64_t steps, int64_t block, const RowSourceBytes& source, int64_t out)
      : dense_rows_(dense_rows), dense_row_bytes_(dense_row_bytes), n0_(n0), n1_(n1), t_(t),
        steps_(steps) {
    const int64_t next_rows = std::min(n1 - n0, out - n1);
    if (block == 0 && source.bytes != nullptr && next_rows > 0) {
      next_task_ = reinterpret_cast<const char*>(source.bytes + n1 * source.row_bytes);
      const int64_t tiles = (n1 - n0 + t - 1) / t;
      share_ = (next_rows * source.row_bytes + tiles - 1) / tiles;
    }
  }

  // For the tile of rows [n, n + rows) (rows = T, or 1 in the tail).
  PrefetchStream ForTile(int64_t n, int64_t rows) const {
    if (next_task_ != nullptr && rows == t_) {
      return PrefetchStream(next_task_ + (n - n0_) / t_ * share_, share_, steps_);
    }
    const int64_t next = std::min(n + rows, n1_ - 1);
    return PrefetchStream(dense_rows_ + (next - n0_) * dense_row_bytes_, rows * dense_row_bytes_, steps_);
  }

 private:
  const char* dense_rows_;
  int64_t dense_row_bytes_, n0_, n1_, t_, steps_;
  const char* next_task_ = nullptr;
  int64_t share_ = 0;
};

}  // namespace placer::model
