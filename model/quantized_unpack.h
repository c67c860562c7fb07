// Unpacking a packed weight (loader/quantized_layout.h) into dense rows for a prompt chunk's
// GEMM (quantized_linear.h): one weight at a time, into a scratch buffer that is reused.
//
// Promise: rows [n0, n1) come out bit for bit as loader::DequantizeLinearWeight gives them,
// w = fma(q, s, m) in float32, and for bfloat16 that float rounded to nearest even (NaN to the
// quiet NaN 0x7FC0), exactly as c10::BFloat16 converts: the dense weight a GEMM reads does not
// depend on the CPU's instruction set or on which rows a task unpacked. Torch-free: raw
// pointers, one function per instruction set (the caller checks the CPU runs it).
//   Avx512: 16 codes per instruction (AVX-512F, BW);  Avx2: 8 (AVX2 + FMA).
// The scalar path is loader::DequantizeLinearWeightRows.
#pragma once

#include <cstdint>

namespace placer::model {

struct UnpackOperands {
  const uint8_t* w;  // packed [out, groups, block_bytes]
  int bits;          // 4 or 8
  int64_t in, group_size, groups, block_bytes;
};

// Rows [n0, n1) into `out` ([rows, in], row n at out + n * in).
void UnpackRowsAvx512(const UnpackOperands& op, int64_t n0, int64_t n1, float* out);
void UnpackRowsAvx512(const UnpackOperands& op, int64_t n0, int64_t n1, uint16_t* bf16_out);
void UnpackRowsAvx2(const UnpackOperands& op, int64_t n0, int64_t n1, float* out);
void UnpackRowsAvx2(const UnpackOperands& op, int64_t n0, int64_t n1, uint16_t* bf16_out);

}  // namespace placer::model
