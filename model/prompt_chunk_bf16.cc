#include "model/prompt_chunk_bf16.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/bf16_rounding.h"
#include "model/column_blocks.h"
#include "model/prompt_chunk_prefetch.h"
#include "model/quantized_linear.h"
#include "model/small_batch_bf16.h"
#include "model/spinning_workers.h"
#include "model/weight_tasks.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

// Input rows per rearranged block (column_blocks.h).
constexpr int64_t kBlockRows = kColumnBlockRows;
// Weight rows per unit of parallel work: a multiple of every tile's row count (6, 8, 12, 24).
constexpr int64_t kWeightRowsPerTask = 48;
// Past this many rows ATen's GEMM is left the chunk (`placer-bench-model products`,
// bench/analysis.md "BF16 prompt chunks").
constexpr int64_t kMostRows = 128;

// The pair of BF16 values at p (bits, little-endian: the first value in the low half).
inline uint32_t PairAt(const uint16_t* p) {
  uint32_t pair;
  std::memcpy(&pair, p, sizeof(pair));
  return pair;
}

struct Operands {
  const uint32_t* xt;     // [blocks][pairs][64]
  RowSourceBytes source_bytes;
  const uint16_t* weight;  // [out, in] BF16 bits, or null: `dense_rows` gives each task its rows
  const DenseBf16WeightRows* dense_rows;
  const float* bias;  // [out] or null
  uint16_t* y;        // [rows, out] BF16 bits
  int64_t rows, in, out;
};

// T weight rows (w, w + in, ...) times the J x 16 rows of one rearranged block, written to
// y[r * y_stride + t] for the block's first `rows` rows. Each output is the same chain of vdpbf16ps
// over the pairs from zero, then + bias, whatever J and T are.
template <int J, int T>
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) inline void Tile(
    const uint32_t* xt, const uint16_t* w, int64_t in, int64_t y_stride, int64_t rows,
    const float* bias, uint16_t* y, PrefetchStream ahead) {
  __m512 acc[T][J];
  _Pragma("GCC unroll 32") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) acc[t][j] = _mm512_setzero_ps();
  }
  const int64_t whole_pairs = in / 2;
  // The next weight bytes (dense weights: the next tile's T rows, T x 4 bytes per pair)
  // prefetched into L2 as one sequential stream in step with this tile's, as the float32
  // kernel does (prompt_chunk_prefetch.h).
  for (int64_t p = 0; p < whole_pairs; ++p) {
    _mm_prefetch(ahead.LineAt(p), _MM_HINT_T1);
    if (T > 16) _mm_prefetch(ahead.LineAt(p, 32), _MM_HINT_T1);
    __m512bh xv[J];
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
      xv[j] = (__m512bh)_mm512_load_si512(xt + p * kBlockRows + 16 * j);
    }
    _Pragma("GCC unroll 32") for (int t = 0; t < T; ++t) {
      const __m512bh wt = (__m512bh)_mm512_set1_epi32(static_cast<int>(PairAt(w + t * in + 2 * p)));
      _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
        acc[t][j] = _mm512_dpbf16_ps(acc[t][j], wt, xv[j]);
      }
    }
  }
  if (whole_pairs * 2 < in) {
    // An odd `in`: the last input paired with zero (its rearranged pair holds a zero too).
    __m512bh xv[J];
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
      xv[j] = (__m512bh)_mm512_load_si512(xt + whole_pairs * kBlockRows + 16 * j);
    }
    _Pragma("GCC unroll 32") for (int t = 0; t < T; ++t) {
      const __m512bh wt = (__m512bh)_mm512_set1_epi32(static_cast<int>(w[t * in + in - 1]));
      _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
        acc[t][j] = _mm512_dpbf16_ps(acc[t][j], wt, xv[j]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    const __m512 b = _mm512_set1_ps(bias != nullptr ? bias[t] : 0.0f);
    for (int j = 0; j < J; ++j) {
      alignas(32) uint16_t lanes[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), RoundToBf16Bits(_mm512_add_ps(acc[t][j], b)));
      const int64_t valid = std::min<int64_t>(16, rows - 16 * j);
      for (int64_t l = 0; l < valid; ++l) y[(16 * j + l) * y_stride + t] = lanes[l];
    }
  }
}

// Weight rows [n0, n1) (the first at `w`) against one block. The tile keeps 24 accumulators
// whatever J is, in 24 + J + 1 of the 32 vector registers.
template <int J>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void WeightRowsAgainstBlock(
    const Operands& op, const uint16_t* w, int64_t block, int64_t n0, int64_t n1) {
  constexpr int T = 24 / J;
  const int64_t pairs = (op.in + 1) / 2;
  const uint32_t* xt = op.xt + block * pairs * kBlockRows;
  const int64_t rows = std::min(kBlockRows, op.rows - block * kBlockRows);
  // The tiles write the task's outputs here, [rows][kWeightRowsPerTask], then each row goes to
  // y at once: written straight into y, a tile's 64 rows of 2-byte outputs, y's row length
  // apart (4 KiB for 2048 outputs), fall in one L1 set and evict each other on every tile.
  alignas(64) uint16_t outputs[kBlockRows * kWeightRowsPerTask];
  const auto bias = [&](int64_t n) { return op.bias != nullptr ? op.bias + n : nullptr; };
  const TaskPrefetches prefetches(reinterpret_cast<const char*>(w), op.in * 2, n0, n1, T, op.in / 2,
                                  block, op.source_bytes, op.out);
  int64_t n = n0;
  for (; n + T <= n1; n += T) {
    Tile<J, T>(xt, w + (n - n0) * op.in, op.in, kWeightRowsPerTask, rows, bias(n),
               outputs + (n - n0), prefetches.ForTile(n, T));
  }
  for (; n < n1; ++n) {
    Tile<J, 1>(xt, w + (n - n0) * op.in, op.in, kWeightRowsPerTask, rows, bias(n),
               outputs + (n - n0), prefetches.ForTile(n, 1));
  }
  uint16_t* y = op.y + block * kBlockRows * op.out + n0;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(y + r * op.out, outputs + r * kWeightRowsPerTask, sizeof(uint16_t) * (n1 - n0));
  }
}

void WeightRows(const Operands& op, int64_t n0, int64_t n1) {
  const uint16_t* w = op.weight != nullptr ? op.weight + n0 * op.in : nullptr;
  if (w == nullptr) {
    // This task's rows only, in a buffer its thread keeps: they stay in the core's cache from
    // being written to being read by every block of inputs.
    thread_local base::CacheLineVector<uint16_t> rows_here;
    rows_here.resize(static_cast<size_t>((n1 - n0) * op.in));
    (*op.dense_rows)(n0, n1 - n0, rows_here.data());
    w = rows_here.data();
  }
  const int64_t blocks = (op.rows + kBlockRows - 1) / kBlockRows;
  for (int64_t block = 0; block < blocks; ++block) {
    switch ((std::min(kBlockRows, op.rows - block * kBlockRows) + 15) / 16) {
      case 1: WeightRowsAgainstBlock<1>(op, w, block, n0, n1); break;
      case 2: WeightRowsAgainstBlock<2>(op, w, block, n0, n1); break;
      case 3: WeightRowsAgainstBlock<3>(op, w, block, n0, n1); break;
      default: WeightRowsAgainstBlock<4>(op, w, block, n0, n1); break;
    }
  }
}

bool BiasApplies(const at::Tensor& bias, int64_t out) {
  if (!bias.defined()) return true;
  return bias.device().is_cpu() && bias.layout() == at::kStrided &&
         (bias.scalar_type() == at::kBFloat16 || bias.scalar_type() == at::kFloat) &&
         bias.dim() == 1 && bias.is_contiguous() && bias.size(0) == out;
}

// One weight of a call: dense BF16 rows at `weight`, or given by `dense_rows`.
struct Product {
  const uint16_t* weight;
  const DenseBf16WeightRows* dense_rows;
  RowSourceBytes source_bytes;
  int64_t out;
  at::Tensor bias;
};

// x times every product's weight: the input rearranged once, then every weight's tasks in one
// parallel loop (as prompt_chunk_linear.cc).
std::vector<at::Tensor> Run(const at::Tensor& x, int64_t in, const std::vector<Product>& products) {
  const at::Tensor flat = x.contiguous().view({-1, in});
  const int64_t rows = flat.size(0);
  std::vector<at::Tensor> ys;
  for (const Product& product : products) ys.push_back(at::empty({rows, product.out}, flat.options()));
  const auto shaped = [&] {
    for (size_t i = 0; i < ys.size(); ++i) {
      std::vector<int64_t> shape = x.sizes().vec();
      shape.back() = products[i].out;
      ys[i] = ys[i].view(shape);
    }
    return ys;
  };
  if (rows == 0) return shaped();
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  const int64_t pairs = (in + 1) / 2;
  // ATen's CPU allocator aligns to 64 bytes: every [64] row of pairs is aligned.
  at::Tensor rearranged = at::empty({blocks, pairs, kBlockRows}, flat.options().dtype(at::kInt));
  const auto* x_bits = reinterpret_cast<const uint16_t*>(flat.data_ptr<at::BFloat16>());
  auto* xt = reinterpret_cast<uint32_t*>(rearranged.data_ptr<int32_t>());
  Bf16RowsToColumnBlocks(x_bits, rows, in, xt);
  std::vector<at::Tensor> biases32;
  std::vector<Operands> ops;
  WeightTasks tasks(kWeightRowsPerTask);
  for (size_t i = 0; i < products.size(); ++i) {
    const Product& product = products[i];
    biases32.push_back(product.bias.defined() ? product.bias.to(at::kFloat).contiguous() : at::Tensor());
    ops.push_back(Operands{xt, product.source_bytes, product.weight, product.dense_rows,
                           biases32.back().defined() ? biases32.back().data_ptr<float>() : nullptr,
                           reinterpret_cast<uint16_t*>(ys[i].data_ptr<at::BFloat16>()), rows, in,
                           product.out});
    tasks.Add(product.out);
  }
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    // One task at a time: a task's rows are what a thread's buffer holds.
    for (int64_t task = begin; task < end; ++task) {
      tasks.ForEachRun(task, task + 1, [&](size_t i, int64_t n0, int64_t n1) { WeightRows(ops[i], n0, n1); });
    }
  };
  if (!SpinningWorkers::Shared().TryRun(tasks.count(), run)) at::parallel_for(0, tasks.count(), 1, run);
  return shaped();
}

}  // namespace

bool PromptChunkBf16Runs() { return DetectBf16Isa() == Bf16Isa::kAvx512Bf16; }

bool PromptChunkBf16Takes(int64_t rows) {
  // Where oneDNN multiplies BF16 on AMX tiles, its GEMM keeps the chunks (weights not in tile
  // order: staged blocks, PLACER_BF16_TILES=0): 16 rows per tdpbf16ps outrun this kernel.
  return PromptChunkBf16Runs() && !BfloatGemmHasAmx() &&
         rows > SmallBatchBf16MaxRows(Bf16Isa::kAvx512Bf16) && rows <= kMostRows;
}

at::Tensor PromptChunkLinearBf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(PromptChunkBf16Runs(), "PromptChunkLinearBf16 needs AVX512-BF16");
  TORCH_CHECK(SmallBatchBf16Applies(x, weight, bias), "PromptChunkLinearBf16: unsupported operands");
  return Run(x, weight.size(1),
             {Product{reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>()), nullptr, {},
                      weight.size(0), bias}})[0];
}

std::vector<at::Tensor> PromptChunkLinearsBf16(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(PromptChunkBf16Runs(), "PromptChunkLinearsBf16 needs AVX512-BF16");
  TORCH_CHECK(weights.size() == biases.size(), "PromptChunkLinearsBf16: one bias (or none) per weight");
  std::vector<Product> products;
  for (size_t i = 0; i < weights.size(); ++i) {
    TORCH_CHECK(SmallBatchBf16Applies(x, weights[i], biases[i]),
                "PromptChunkLinearsBf16: unsupported operands for weight ", i);
    products.push_back(Product{reinterpret_cast<const uint16_t*>(weights[i].data_ptr<at::BFloat16>()),
                               nullptr, {}, weights[i].size(0), biases[i]});
  }
  return Run(x, x.size(-1), products);
}

at::Tensor PromptChunkLinearBf16(const at::Tensor& x, int64_t out,
                                 const DenseBf16WeightRows& dense_rows, const at::Tensor& bias) {
  return PromptChunkLinearsBf16(x, {out}, {dense_rows}, {bias})[0];
}

std::vector<at::Tensor> PromptChunkLinearsBf16(const at::Tensor& x, const std::vector<int64_t>& outs,
                                               const std::vector<DenseBf16WeightRows>& dense_rows,
                                               const std::vector<at::Tensor>& biases,
                                               const std::vector<RowSourceBytes>& source_bytes) {
  TORCH_CHECK(PromptChunkBf16Runs(), "PromptChunkLinearBf16 needs AVX512-BF16");
  TORCH_CHECK(outs.size() == dense_rows.size() && outs.size() == biases.size() &&
                  (source_bytes.empty() || source_bytes.size() == outs.size()),
              "PromptChunkLinearsBf16: one output count, row source and bias (or none) per weight");
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kBFloat16 && x.layout() == at::kStrided &&
                  x.dim() >= 1 && x.size(-1) > 0,
              "PromptChunkLinearBf16: unsupported input");
  std::vector<Product> products;
  for (size_t i = 0; i < outs.size(); ++i) {
    TORCH_CHECK(outs[i] >= 0 && BiasApplies(biases[i], outs[i]),
                "PromptChunkLinearBf16: unsupported operands for weight ", i);
    products.push_back(Product{nullptr, &dense_rows[i],
                               source_bytes.empty() ? RowSourceBytes{} : source_bytes[i], outs[i],
                               biases[i]});
  }
  return Run(x, x.size(-1), products);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
