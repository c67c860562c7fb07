// Inside SmallBatchLinear: the operands of one call and the two kernel families, each
// computing the outputs of weight rows (or columns) [n0, n1) for every input row.
#pragma once

#include <cstdint>

#include "model/small_batch_linear.h"

namespace placer::model {

struct Operands {
  const float* x;       // [rows, in], contiguous
  const float* weight;  // [out, in] (kOutIn) or [in, out] (kInOut), contiguous
  const float* bias;    // [out] or null
  float* y;             // [rows, out]
  int64_t rows, in, out;
};

// Weight [out, in]: register tiles of 2 weight rows x up to 8 input rows, one vector
// accumulator per output, reduced across lanes at the end (small_batch_out_in.cc).
void OutInWeightRows(VectorIsa isa, const Operands& op, int64_t n0, int64_t n1);

// Weight [in, out]: 16 (8) output columns per vector, one lane per output, fed one weight
// row after another, so each output is a chain of FMAs over `in` in order (small_batch_in_out.cc).
void InOutWeightColumns(VectorIsa isa, const Operands& op, int64_t n0, int64_t n1);

}  // namespace placer::model
