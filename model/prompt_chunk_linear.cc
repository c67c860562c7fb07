#include "model/prompt_chunk_linear.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it themselves
// (maybe-uninitialized, GCC bug 105593, fixed in GCC 13) wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/column_blocks.h"
#include "model/prompt_chunk_avx2.h"
#include "model/prompt_chunk_prefetch.h"
#include "model/spinning_workers.h"
#include "model/weight_tasks.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

// Input rows per transposed block (column_blocks.h).
constexpr int64_t kBlockRows = kColumnBlockRows;
// Weight rows per unit of parallel work: a multiple of every tile's row count (6, 8, 12, 24),
// and small enough that a thread's rows stay in its L2 from one block of inputs to the next.
constexpr int64_t kWeightRowsPerTask = 48;
// Past this many rows sgemm's copy of the weight is spread over enough rows to win
// (`placer-bench-model products`, bench/analysis.md).
constexpr int64_t kMostRows = 128;
// Up to this many rows the few-row kernels keep a batch (decode batches of up to 32 sequences
// stay on one kernel). Past it this kernel beats them whatever BLAS libtorch calls:
// `placer-bench-model products --threads 2 --rows 32 48 64 128` on a Zen 5 VM whose OpenBLAS runs
// its Haswell kernels (so SmallBatchLinearMaxRows keeps the few-row kernels to 256 rows, ahead of
// that sgemm), small preset, ms per step: 22-23 against 32-33 at 48 rows, 29-30 against 41.5 at
// 64, 53-56 against 77-98 at 128 (bench/analysis.md).
constexpr int64_t kFewRowsBeforeChunks = 32;
// With AVX2 alone: past the few-row kernels' rows (SmallBatchLinearMaxRows) up to this many.
// `placer-bench-model products` (small preset, 2 threads, a Zen 3 EPYC, ms a pass, this kernel
// / the few-row kernels / sgemm unpadded): 16 rows 28-30 / 35-38 / 56, 32 rows 46-59 / 61-74 /
// 80-85, 64 rows 73-85 / 117-132 / 110-115, 128 rows 175-194 / 274-287 / 195-205, 192 rows
// 248-271 / 358-413 / 258-274; at 256 sgemm led (333-365 against 366-379).
constexpr int64_t kMostRowsAvx2 = 192;

// T weight rows (w, w + in, ...) times the J x 16 input rows of one transposed block, written
// to y[r * y_stride + t] for the block's first `rows` rows. Each output is a chain of multiply-adds
// over k = 0 .. in-1 from zero, then + bias: the same arithmetic whatever J and T are.
template <int J, int T>
__attribute__((target("avx512f"), always_inline)) inline void Tile(const float* xt,
                                                                    const float* w, int64_t in,
                                                                    int64_t y_stride, int64_t rows,
                                                                    const float* bias, float* y,
                                                                    PrefetchStream ahead) {
  __m512 acc[T][J];
  _Pragma("GCC unroll 32") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) acc[t][j] = _mm512_setzero_ps();
  }
  // The next weight bytes (prompt_chunk_prefetch.h; dense weights: the next tile's T rows, T x
  // 4 bytes per input, two lines when T > 16) prefetched into L2 as one sequential stream in
  // step with this tile's: the weights come from DRAM while the inputs stream from L2
  // (`placer-bench-model products`, 64 rows of the small preset, 2 threads: 38-41 ms against
  // 45-46 without, the few-row kernels 47-49).
  for (int64_t k = 0; k < in; ++k) {
    _mm_prefetch(ahead.LineAt(k), _MM_HINT_T1);
    if (T > 16) _mm_prefetch(ahead.LineAt(k, 32), _MM_HINT_T1);
    __m512 xv[J];
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
      xv[j] = _mm512_load_ps(xt + k * kBlockRows + 16 * j);
    }
    _Pragma("GCC unroll 32") for (int t = 0; t < T; ++t) {
      const __m512 wt = _mm512_set1_ps(w[t * in + k]);
      _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
        acc[t][j] = _mm512_fmadd_ps(wt, xv[j], acc[t][j]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    const float b = bias != nullptr ? bias[t] : 0.0f;
    for (int j = 0; j < J; ++j) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[t][j]);
      const int64_t valid = std::min<int64_t>(16, rows - 16 * j);
      for (int64_t l = 0; l < valid; ++l) y[(16 * j + l) * y_stride + t] = lanes[l] + b;
    }
  }
}

struct Operands {
  const float* xt;      // [blocks][in][64]
  RowSourceBytes source_bytes;
  const float* weight;  // [out, in], or null: `dense_rows` gives each task its rows
  const DenseWeightRows* dense_rows;
  const float* bias;    // [out] or null
  float* y;             // [rows, out]
  int64_t rows, in, out;
  FloatColumnBlocks layout;  // xt's, which picks the tiles
};

// Weight rows [n0, n1) (the first at `w`) against every block. The tile keeps 24 accumulators
// whatever J is, in 24 + J + 1 of the 32 vector registers.
template <int J>
__attribute__((target("avx512f"))) void WeightRowsAgainstBlock(const Operands& op, const float* w,
                                                               int64_t block, int64_t n0,
                                                               int64_t n1) {
  constexpr int T = 24 / J;
  const float* xt = op.xt + block * op.in * kBlockRows;
  const int64_t rows = std::min(kBlockRows, op.rows - block * kBlockRows);
  // The tiles write the task's outputs here, [rows][kWeightRowsPerTask], then each row goes to
  // y at once: written straight into y, a tile's 64 rows of outputs, y's row length apart (4
  // KiB or a multiple for 1024 outputs and more), fall in one L1 set and evict each other on
  // every tile (as in prompt_chunk_bf16.cc).
  alignas(64) float outputs[kBlockRows * kWeightRowsPerTask];
  const auto bias = [&](int64_t n) { return op.bias != nullptr ? op.bias + n : nullptr; };
  int64_t n = n0;
  const TaskPrefetches prefetches(reinterpret_cast<const char*>(w), op.in * 4, n0, n1, T,
                                  op.in, block, op.source_bytes, op.out);
  for (; n + T <= n1; n += T) {
    Tile<J, T>(xt, w + (n - n0) * op.in, op.in, kWeightRowsPerTask, rows, bias(n),
               outputs + (n - n0), prefetches.ForTile(n, T));
  }
  for (; n < n1; ++n) {
    Tile<J, 1>(xt, w + (n - n0) * op.in, op.in, kWeightRowsPerTask, rows, bias(n),
               outputs + (n - n0), prefetches.ForTile(n, 1));
  }
  float* y = op.y + block * kBlockRows * op.out + n0;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(y + r * op.out, outputs + r * kWeightRowsPerTask, sizeof(float) * (n1 - n0));
  }
}

// The same on AVX2 (prompt_chunk_avx2.h): its tiles write this task's outputs, copied as above.
void WeightRowsAgainstBlockAvx2(const Operands& op, const float* w, int64_t block, int64_t n0,
                                int64_t n1) {
  alignas(64) float outputs[kBlockRows * kWeightRowsPerTask];
  const int64_t rows = std::min(kBlockRows, op.rows - block * kBlockRows);
  PromptChunkBlockAvx2(PromptChunkBlock{op.xt + block * op.in * kBlockRows, w,
                                        op.bias != nullptr ? op.bias + n0 : nullptr, op.in, rows, n0,
                                        n1, outputs, kWeightRowsPerTask,
                                        reinterpret_cast<const char*>(w), op.in * 4, block, op.out,
                                        op.source_bytes});
  float* y = op.y + block * kBlockRows * op.out + n0;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(y + r * op.out, outputs + r * kWeightRowsPerTask, sizeof(float) * (n1 - n0));
  }
}

void WeightRows(const Operands& op, int64_t n0, int64_t n1) {
  const float* w = op.weight != nullptr ? op.weight + n0 * op.in : nullptr;
  if (w == nullptr) {
    // This task's rows only, in a buffer its thread keeps: they stay in the core's cache from
    // being written to being read by every block of inputs.
    thread_local base::CacheLineVector<float> rows_here;
    rows_here.resize(static_cast<size_t>((n1 - n0) * op.in));
    (*op.dense_rows)(n0, n1 - n0, rows_here.data());
    w = rows_here.data();
  }
  const int64_t blocks = (op.rows + kBlockRows - 1) / kBlockRows;
  if (op.layout == FloatColumnBlocks::kGroupsOf8) {
    for (int64_t block = 0; block < blocks; ++block) WeightRowsAgainstBlockAvx2(op, w, block, n0, n1);
    return;
  }
  for (int64_t block = 0; block < blocks; ++block) {
    switch ((std::min(kBlockRows, op.rows - block * kBlockRows) + 15) / 16) {
      case 1: WeightRowsAgainstBlock<1>(op, w, block, n0, n1); break;
      case 2: WeightRowsAgainstBlock<2>(op, w, block, n0, n1); break;
      case 3: WeightRowsAgainstBlock<3>(op, w, block, n0, n1); break;
      default: WeightRowsAgainstBlock<4>(op, w, block, n0, n1); break;
    }
  }
}

// One weight of a call: dense float32 rows at `weight`, or given by `dense_rows`.
struct Product {
  const float* weight;
  const DenseWeightRows* dense_rows;
  RowSourceBytes source_bytes;
  int64_t out;
  at::Tensor bias;
};

// x times every product's weight: the input rearranged once, then every weight's tasks in one
// parallel loop (a layer's q, k and v wait for one another once, not three times).
std::vector<at::Tensor> Run(const at::Tensor& x, int64_t in, const std::vector<Product>& products) {
  std::vector<at::Tensor> ys;
  at::Tensor flat;
  for (const Product& product : products) {
    auto [rows_of_x, y, shape] = RowsOf(x, in, product.out);
    if (!flat.defined()) flat = rows_of_x;
    ys.push_back(y.view(shape));
  }
  const int64_t rows = flat.size(0);
  if (rows == 0) return ys;
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  // ATen's CPU allocator aligns to 64 bytes: every [in][64] row of the blocks is aligned.
  at::Tensor transposed = at::empty({blocks, in, kBlockRows}, flat.options());
  const FloatColumnBlocks layout = FloatColumnBlocksFor(DetectVectorIsa() == VectorIsa::kAvx512);
  FloatRowsToColumnBlocks(flat.data_ptr<float>(), rows, in, transposed.data_ptr<float>(), layout);
  std::vector<Operands> ops;
  WeightTasks tasks(kWeightRowsPerTask);
  for (size_t i = 0; i < products.size(); ++i) {
    const Product& product = products[i];
    ops.push_back(Operands{transposed.data_ptr<float>(), product.source_bytes, product.weight, product.dense_rows,
                           product.bias.defined() ? product.bias.data_ptr<float>() : nullptr,
                           ys[i].data_ptr<float>(), rows, in, product.out, layout});
    tasks.Add(product.out);
  }
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    // One task at a time: a task's rows are what a thread's buffer holds.
    for (int64_t task = begin; task < end; ++task) {
      tasks.ForEachRun(task, task + 1, [&](size_t i, int64_t n0, int64_t n1) { WeightRows(ops[i], n0, n1); });
    }
  };
  if (!SpinningWorkers::Shared().TryRun(tasks.count(), run)) at::parallel_for(0, tasks.count(), 1, run);
  return ys;
}

}  // namespace

bool PromptChunkLinearRuns() { return DetectVectorIsa() != VectorIsa::kNone; }

bool PromptChunkLinearTakes(int64_t rows) {
  if (DetectVectorIsa() == VectorIsa::kAvx2) {
    return rows > SmallBatchLinearMaxRows(VectorIsa::kAvx2) && rows <= kMostRowsAvx2;
  }
  return PromptChunkLinearRuns() && rows > kFewRowsBeforeChunks && rows <= kMostRows;
}

at::Tensor PromptChunkLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(PromptChunkLinearRuns(), "PromptChunkLinear needs AVX2 or AVX-512");
  TORCH_CHECK(SmallBatchLinearApplies(x, weight, bias), "PromptChunkLinear: unsupported operands");
  return Run(x, weight.size(1), {Product{weight.data_ptr<float>(), nullptr, {}, weight.size(0), bias}})[0];
}

std::vector<at::Tensor> PromptChunkLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                           const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(PromptChunkLinearRuns(), "PromptChunkLinears needs AVX2 or AVX-512");
  TORCH_CHECK(weights.size() == biases.size(), "PromptChunkLinears: one bias (or none) per weight");
  std::vector<Product> products;
  for (size_t i = 0; i < weights.size(); ++i) {
    TORCH_CHECK(SmallBatchLinearApplies(x, weights[i], biases[i]),
                "PromptChunkLinears: unsupported operands for weight ", i);
    products.push_back(Product{weights[i].data_ptr<float>(), nullptr, {}, weights[i].size(0), biases[i]});
  }
  return Run(x, x.size(-1), products);
}

at::Tensor PromptChunkLinear(const at::Tensor& x, int64_t out, const DenseWeightRows& dense_rows,
                             const at::Tensor& bias) {
  return PromptChunkLinears(x, {out}, {dense_rows}, {bias})[0];
}

std::vector<at::Tensor> PromptChunkLinears(const at::Tensor& x, const std::vector<int64_t>& outs,
                                           const std::vector<DenseWeightRows>& dense_rows,
                                           const std::vector<at::Tensor>& biases,
                                           const std::vector<RowSourceBytes>& source_bytes) {
  TORCH_CHECK(PromptChunkLinearRuns(), "PromptChunkLinear needs AVX2 or AVX-512");
  TORCH_CHECK(outs.size() == dense_rows.size() && outs.size() == biases.size() &&
                  (source_bytes.empty() || source_bytes.size() == outs.size()),
              "PromptChunkLinears: one output count, row source and bias (or none) per weight");
  const auto cpu_float = [](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.layout() == at::kStrided;
  };
  TORCH_CHECK(cpu_float(x) && x.dim() >= 1 && x.size(-1) > 0, "PromptChunkLinear: unsupported input");
  std::vector<Product> products;
  for (size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& bias = biases[i];
    TORCH_CHECK(outs[i] >= 0 && (!bias.defined() || (cpu_float(bias) && bias.dim() == 1 &&
                                                     bias.is_contiguous() && bias.size(0) == outs[i])),
                "PromptChunkLinear: unsupported operands for weight ", i);
    products.push_back(Product{nullptr, &dense_rows[i],
                               source_bytes.empty() ? RowSourceBytes{} : source_bytes[i], outs[i], bias});
  }
  return Run(x, x.size(-1), products);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
