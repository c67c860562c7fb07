// The float32 prompt-chunk kernel's tiles for CPUs with AVX2 and FMA but not AVX-512
// (prompt_chunk_linear.h says what the kernel promises). AVX2 has 16 vector registers of 8
// lanes: a tile is T weight rows x J vectors of 8 input rows (12 accumulators, J input vectors
// and one broadcast weight), and a block's 64 input rows take passes of 3 or 2 vectors (1 only
// for 8 rows or fewer). Each output is the AVX-512 tiles' chain of multiply-adds over
// k = 0 .. in-1 from zero, then + bias: so the same bits on either ISA.
#pragma once

#include <cstdint>

#include "model/prompt_chunk_prefetch.h"

namespace placer::model {

// What one task's rows [n0, n1) against one column block need.
struct PromptChunkBlock {
  const float* xt;       // the block: 8 groups of [in][8] floats (column_blocks.h, without AVX-512)
  const float* w;        // weight row n0, rows `in` floats apart
  const float* bias;     // bias of row n0, or null
  int64_t in, rows;      // rows: the block's valid input rows (1-64)
  int64_t n0, n1;
  float* outputs;        // [rows][outputs_stride]: output (r, n) at r * outputs_stride + n - n0
  int64_t outputs_stride;
  // Where the next bytes come from (TaskPrefetches' arguments but the tile rows).
  const char* dense_rows;
  int64_t dense_row_bytes, block, out;
  RowSourceBytes source;
};

// Every output of the block's rows against weight rows [n0, n1). Needs AVX2 and FMA.
void PromptChunkBlockAvx2(const PromptChunkBlock& b);

}  // namespace placer::model
