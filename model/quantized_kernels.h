// Inside QuantizedLinearKernel: the operands of one call and one function per instruction set,
// each computing outputs [n0, n1) for every input row.
#pragma once

#include <cstdint>

namespace placer::model {

struct QuantOperands {
  const float* x;        // [rows, in], contiguous float32
  const float* x_group_sums;  // [rows, groups]: each group's inputs summed (in one fixed order)
  const uint8_t* w;      // packed [out, groups, block_bytes]
  const float* bias;     // [out] or null
  float* y;              // [rows, out]
  int64_t rows, in, out;
  int bits;              // 4 or 8
  int64_t group_size, groups, block_bytes;
  // Whole weight rows that make kStreamPrefetchBytes (StreamAheadRows), once per call: computed
  // per output row, its division showed in the one-row kernels' profiles.
  int64_t stream_rows_ahead;
};

void QuantizedRowsAvx512(const QuantOperands& op, int64_t n0, int64_t n1);
void QuantizedRowsAvx2(const QuantOperands& op, int64_t n0, int64_t n1);

}  // namespace placer::model
