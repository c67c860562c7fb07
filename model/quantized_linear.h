// x @ W^T + bias where W is a packed quantized weight (loader/quantized_layout.h), read in its
// packed bytes: a decode step's few rows go through kernels that decode each block in
// registers and multiply it with every row while it is there (never a float copy of the
// weight); more rows (prompt chunks, QuantizedLinearMaxRows) unpack one weight at a time into a
// per-thread scratch buffer that is reused (quantized_unpack.h), then run the compute dtype's
// GEMM (BF16: the BF16 prompt-chunk kernel with AVX512-BF16, which unpacks each task's rows
// where it uses them, else oneDNN, on AMX tiles where the CPU has them; F32: PromptChunkLinear,
// which unpacks likewise, or sgemm).
//
// The kernels compute each block as s · (q · x) + m · (sum of x) in float32 — the weight
// loader::DequantizeLinearWeight gives, fma(q, s, m), factored so a weight costs one
// conversion and one fma per row (quantized_kernels.cc) — except 4-bit weights with AVX-512,
// whose codes pick their weight fma(q, s, m) from a 16-entry table per block (one permute per
// 16 weights) and multiply it unfactored, and 4-bit weights in groups of 128s on AVX512-VNNI
// or AVX2 alone, whose inputs become 24-bit integers for integer products (UsesInt4DigitsKernel);
// in one fixed order per output (16 or 8 lanes, then a fixed lane sum), so a row's result does
// not depend on the other rows of the call: batch invariance, as for the float kernels.
//   kAvx512: 16 lanes (AVX-512F, BW);   kAvx2: 8 lanes (AVX2 + FMA).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "loader/quantized_layout.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_vnni.h"

namespace placer::model {

enum class QuantIsa { kNone, kAvx2, kAvx512 };

QuantIsa DetectQuantIsa();                   // the best this CPU runs (checked once)
std::vector<QuantIsa> RunnableQuantIsas();   // every one it runs, best first
const char* QuantIsaName(QuantIsa isa);

// Rows up to which the kernels are used for a weight of `layout` and rows of dtype `compute`
// (float32 or BF16); more are unpacked into a scratch buffer for the GEMM of that dtype. Decode
// steps (up to --max-batch-size rows, 8 by default) stay with the kernels everywhere.
int64_t QuantizedLinearMaxRows(QuantIsa isa, const loader::PackedLayout& layout,
                               at::ScalarType compute);
// Whether ATen's BF16 GEMM runs on AMX tiles here (what makes unpack + GEMM pay from 16 rows).
bool BfloatGemmHasAmx();

// True when weight is a packed weight in host memory, x ([..., in]) float32 or BF16 on the
// CPU with `in` matching, and bias undefined or a contiguous [out] float32 / BF16.
bool QuantizedLinearApplies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The kernels of `isa` (not kNone, runnable here) for any number of rows; result in x's dtype
// (BF16 rounded once from the float32 sum). Requires QuantizedLinearApplies.
at::Tensor QuantizedLinearKernel(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, QuantIsa isa);

// --quantize-activations int8 (quantized_vnni.h): 4-bit weights in groups of 32 or a multiple
// of 128 multiply int8-quantized activations on AVX512-VNNI or AVX-VNNI CPUs; prompt chunks of
// more than kMostInt8ActivationVectorRows rows on AMX-INT8 where UsesInt8ActivationTiles
// (int8_activation_tiles.h). A row's result does not depend on its batch within each of the two
// ranges (decode steps of up to 16 streams; chunks). Process-wide: placerd serves one model and sets it at
// load (LoadCausalLm, from RuntimePlan::quantize).
void SetInt8Activations(bool enabled);
bool Int8ActivationsEnabled();
// Whether a weight would take that path now (the mode on, the CPU and layout fit).
bool UsesInt8Activations(const at::Tensor& weight);
// That path, whatever the mode. Requires QuantizedLinearApplies, Int8ActivationKernelRuns
// and Int8ActivationKernelApplies.
// `isa` (a runnable one) picks the kernel; both give the same bits.
at::Tensor QuantizedLinearInt8Activations(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias,
                                          Int8ActivationIsa isa = DetectInt8ActivationIsa());

// The AMX-INT8 chunk path of the int8-activation mode: whether QuantizedLinear gives it chunks
// of these operands (the mode on, a CPU with AMX-INT8, activation blocks of 64 or 128), and that
// path for any rows, whatever the mode (it requires the CPU and layout).
bool UsesInt8ActivationTiles(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearInt8ActivationTiles(const at::Tensor& x, const at::Tensor& weight,
                                              const at::Tensor& bias);

// BF16 rows times 4-bit weights on AVX512-BF16 (quantized_int4_bf16.h): the codes become BF16
// numbers in registers and vdpbf16ps multiplies them, for any number of rows (batch invariant).
// QuantizedLinear takes it for the rows it gives the kernels (QuantizedLinearMaxRows) wherever
// UsesInt4Bf16Kernel; QuantizedLinearInt4Bf16 requires it.
bool UsesInt4Bf16Kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearInt4Bf16(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias);
// The same for 8-bit weights in groups of a multiple of 64 inputs (quantized_int8_bf16.h).
bool UsesInt8Bf16Kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearInt8Bf16(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias);

// Rows times 4-bit weights in groups of a multiple of 128 (quantized_int4_digits.h): each block
// of 128 inputs as three signed bytes of a 24-bit integer, multiplied with the codes by vpdpbusd
// (AVX512-VNNI) or vpmaddubsw (AVX2), for any number of rows (batch invariant). QuantizedLinear
// takes it for the rows it gives the kernels wherever UsesInt4DigitsKernel: float32 rows with
// AVX512-VNNI, float32 and BF16 rows on AVX2 alone. QuantizedLinearInt4Digits, in form `isa`
// (runnable here), takes float32 or BF16 rows of any such weight.
bool UsesInt4DigitsKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearInt4Digits(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias,
                                     Int4DigitsIsa isa = DetectInt4DigitsIsa());
// Float32 or BF16 rows times 8-bit weights in groups of a multiple of 128 (one per output
// channel included) on AVX512-VNNI (quantized_int8_digits.h): the same digits, multiplied with
// the signed codes by vpdpbusd, for any number of rows (batch invariant). QuantizedLinear takes
// it for the rows it gives the kernels wherever UsesInt8DigitsKernel, before the 8-bit x BF16
// and float kernels; QuantizedLinearInt8Digits requires it.
bool UsesInt8DigitsKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearInt8Digits(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias);
// The 4-bit operands past QuantizedLinearMaxRows (prompt chunks): the chunk's rows in the lanes
// (quantized_int4_digit_chunks.h, AVX512-VNNI), the same digits and bound, its own summing order.
// QuantizedLinear takes it for float32 rows the F32 prompt-chunk kernel does not take wherever
// UsesInt4DigitChunksKernel; this entry, for any number of rows, requires it.
bool UsesInt4DigitChunksKernel(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias);
at::Tensor QuantizedLinearInt4DigitChunks(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias);
// Float32 rows times 4-bit or 8-bit weights in groups of 128s on AMX-INT8 tiles, each input as
// the decode digits kernel's three signed bytes (digit_tiles.h), for any number of rows (batch
// invariant). QuantizedLinear takes it for float32 prompt chunks (past QuantizedLinearMaxRows)
// wherever UsesDigitTilesKernel; QuantizedLinearDigitTiles requires it.
bool UsesDigitTilesKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearDigitTiles(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias);
// Float32 or BF16 rows times 4-bit or 8-bit weights on AMX tiles (quantized_tiles.h): codes and
// the three BF16 parts of each float32 input (one for a BF16 input) multiplied by tdpbf16ps, for
// any number of rows (batch invariant). QuantizedLinear takes it past QuantizedLinearMaxRows
// (prompt chunks) wherever UsesQuantizedTilesKernel: float32 rows of groups of 64 or more
// inputs, BF16 rows up to kMostQuantizedTileBf16Rows; QuantizedLinearTiles, for any rows and
// groups, requires it.
bool UsesQuantizedTilesKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor QuantizedLinearTiles(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias);

// What the model calls: the int8-activation path when UsesInt8Activations, else the kernels up
// to QuantizedLinearMaxRows (UsesInt4Bf16Kernel's, UsesInt8DigitsKernel's for BF16 rows,
// UsesInt8Bf16Kernel's or UsesInt4DigitsKernel's, else DetectQuantIsa's), else for float32 prompt chunks the AMX kernel
// where UsesQuantizedTilesKernel, the chunk kernel where UsesInt4DigitChunksKernel (rows the F32
// prompt-chunk kernel does not take), else the weight dequantized (quantized_unpacked_linear.h).
at::Tensor QuantizedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// QuantizedLinear of one x by each weight (Llama's q, k and v; gate and up), as one call where
// the weights differ only in their outputs and QuantizedLinear would give each the same kernel
// (one preparation of x, one parallel loop: RunPackedProducts), else one QuantizedLinear
// each. The same outputs, bit for bit, either way. `biases` holds one (possibly undefined)
// tensor per weight.
std::vector<at::Tensor> QuantizedLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                         const std::vector<at::Tensor>& biases);

}  // namespace placer::model
