#include "model/quantized_linear.h"

#include <algorithm>
#include <atomic>
#include <functional>

#include "loader/quantized_weight.h"
#include "model/int8_activation_tiles.h"
#include "model/packed_bf16_kernels.h"
#include "model/packed_kernel_runs.h"
#include "model/packed_product.h"
#include "model/prompt_chunk_bf16.h"
#include "model/prompt_chunk_linear.h"
#include "model/quantized_int4_bf16.h"
#include "model/quantized_int4_digit_chunks.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_int4_digits_avx2.h"
#include "model/quantized_int4_quads.h"
#include "model/digit_tiles.h"
#include "model/quantized_tiles.h"
#include "model/quantized_int8_bf16.h"
#include "model/quantized_int8_digits.h"
#include "model/quantized_kernels.h"
#include "model/quantized_unpacked_linear.h"
#include "model/quantized_vnni.h"

namespace placer::model {
namespace {

bool Runs(QuantIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case QuantIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    case QuantIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case QuantIsa::kNone: return true;
  }
  return false;
}

bool CpuFloat(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == at::kStrided &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

}  // namespace

std::vector<QuantIsa> RunnableQuantIsas() {
  std::vector<QuantIsa> isas;
  for (QuantIsa isa : {QuantIsa::kAvx512, QuantIsa::kAvx2}) {
    if (Runs(isa)) isas.push_back(isa);
  }
  return isas;
}

QuantIsa DetectQuantIsa() {
  static const QuantIsa isa = [] {
    const std::vector<QuantIsa> isas = RunnableQuantIsas();
    return isas.empty() ? QuantIsa::kNone : isas.front();
  }();
  return isa;
}

const char* QuantIsaName(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kAvx512: return "avx512";
    case QuantIsa::kAvx2: return "avx2";
    case QuantIsa::kNone: return "none";
  }
  return "none";
}

bool BfloatGemmHasAmx() {
  // ATen multiplies BF16 matrices on the CPU through oneDNN, whose JIT kernels take the AMX
  // tiles where the CPU (and the kernel's XSAVE state) has them: a 64-row chunk of the small
  // preset's layers in 19 ms, where the AVX-512 packed kernels take 45-78.
  static const bool amx = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("amx-tile") &&
           at::hasMKLDNN();
  }();
  return amx;
}

int64_t QuantizedLinearMaxRows(QuantIsa isa, const loader::PackedLayout& layout,
                               at::ScalarType compute) {
  // `placer-bench-model quantized-products --threads 2` (the small preset's layers, ms per
  // pass; an AVX-512 + AMX Xeon, quiet): the kernels cost ~0.7 ms per row and group size,
  // unpack + GEMM a nearly fixed cost (the unpack, ~5 ms, is ~0.1 ns per weight).
  //   BF16 rows, AMX: at 16 rows kernels 12-21 vs unpack + GEMM 18-19; at 32, 24-38 vs 21-22.
  //   F32 rows (unpack to float32, then placer's Linear: few-row kernels or sgemm): at 32 rows
  //   groups of 32 take 38 vs 25, the others 22-25 vs 24-25; at 64, 75 vs 48 and 44-46 vs 47-48;
  //   at 128 unpack + GEMM wins every scheme (74 vs 85-144).
  //   With the prompt-chunk kernel (prompt_chunk_linear.h) taking F32 chunks of 33-128 rows
  //   (same tool, same CPU): at 16 rows groups of 32 take 18 vs 14, at 32 rows int8 and groups
  //   of 128 21-23 vs 21-21, at 64 40-46 vs 34-35 (groups of 32: 76 vs 36).
  //   BF16 rows without AMX, with AVX512-BF16 (a Zen 4 EPYC, same tool): the BF16 prompt-chunk
  //   kernel with each task's rows unpacked (QuantizedPromptChunkBf16) takes 12-13 ms from 1 to
  //   16 rows and 23-25 at 64, the kernels 7-8 at 8 rows, 17-20 at 16, 53-74 at 64.
  // Elsewhere (AVX-512 BF16 rows without AMX or AVX512-BF16) the kernels keep chunks up to 128 rows,
  // as measured before unpacking was vectorized (int4 64-token prefill of the small preset: 125
  // ms in the kernels against 327 dequantized), except F32 rows of 4-bit weights on AVX2, past
  // 32 rows (a Zen 3 EPYC, same tool, 2 threads, float kernel vs the weight unpacked +
  // OpenBLAS's sgemm; a noisy VM, ranges of three passes): groups of 32 at 48 rows 74-119 vs
  // 55-71 ms, 64 rows 95-130 vs 53-83, 128 rows 195-274 vs 98-148; groups of 128 even at 48
  // and 64 rows (55-64 vs 58-65, 69-85 vs 73-89), 127-183 vs 94-117 at 128; at 32 rows the
  // kernel wins (32-56 vs 37-64). 8-bit weights stay (at 64 rows 82.6 vs 95.1).
  // With the F32 prompt-chunk kernel on AVX2 (prompt_chunk_avx2.h; 17-192 rows, each task's
  // rows unpacked), same tool and CPU, kernel vs unpacked, two passes: groups of 32 at 24 rows
  // 41-67 vs 26-37, at 32 97-99 vs 46-47; groups of 128 at 24 rows 32 vs 23-25, at 32 49-60 vs
  // 32-45, at 64 90-105 vs 61-73, at 128 198-221 vs 114-164; 8-bit at 24 rows 33 vs 36, at 32
  // 43-45 vs 40, at 48 54-75 vs 43-55, at 128 139-158 vs 121-122.
  if (isa == QuantIsa::kNone) return 0;
  // BF16 rows on AVX2 go where float32 rows go (widened, the same arithmetic): the ~1.1B's
  // --quantize int4 32-token prefill (placer-bench-model decode, 3 alternating runs) 950-973 ms
  // in the float kernels, 598-792 as 32 widened rows in the F32 prompt-chunk kernel.
  if (isa == QuantIsa::kAvx2) return layout.bits == 4 ? 16 : 24;
  if (isa == QuantIsa::kAvx512) {
    // 16, not 8, where the chunk kernel wins from 9: decode steps of up to 16 rows stay exact.
    if (compute == at::kBFloat16 && (BfloatGemmHasAmx() || PromptChunkBf16Runs())) return 16;
    // (PromptChunkLinear runs on every CPU that runs these kernels: AVX-512F.)
    // The three-digit kernel (AVX512-VNNI, 4-bit groups of 128s) against the quads kernel it
    // replaces there, same tool and runs, ms per pass: 1 row 1.02-1.03 vs 1.12-1.21, 2 rows
    // 1.72-1.74 vs 1.81-1.84, 4 rows 2.89 vs 2.91-2.93, 8 rows 5.43-5.50 vs 5.57-5.68, 16 rows
    // 10.5-10.6 vs 10.9-11.1; it takes every row count the quads kernel would, so a decode
    // row's bits do not depend on its batch.
    // The quads kernel (4-bit groups of 128s) takes 1-4 rows per pass over a weight row, so
    // more rows cost it more than the general kernel: small preset's layers, 2 threads, ms per
    // pass, quads vs unpack + GEMM: 8 rows 4.7-5.0 vs 5.5-6.1, 16 rows 9.8 vs 9.4-9.9, 32 rows
    // 18.1-20.1 vs 16.6-16.8 (quantized-products --rows 8 16 32 64 --schemes int4_g128, Zen 4).
    if (compute == at::kFloat) {
      return layout.group_size <= 32 || Int4QuadsApply(layout) ? 16 : 32;
    }
  }
  return 128;
}

bool QuantizedLinearApplies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const std::optional<loader::PackedLayout> layout = loader::PackedLayoutOf(weight);
  if (!layout || !weight.device().is_cpu() || !CpuFloat(x) || x.dim() < 1 ||
      x.size(-1) != layout->in) {
    return false;
  }
  if (bias.defined() && (!CpuFloat(bias) || bias.dim() != 1 || !bias.is_contiguous() ||
                         bias.size(0) != layout->out)) {
    return false;
  }
  return true;
}

namespace {

// The three-digit decode kernel for the rows the kernels take (quantized_int4_digits.h): F32
// rows on AVX512-VNNI (BF16 rows keep the vdpbf16ps or float kernels there); F32 and BF16 rows on
// AVX2 alone, where the float kernel was bound by its instructions (quantized_int4_digits_avx2.h).
bool DecodeDigitsTake(const loader::PackedLayout& layout, at::ScalarType rows, QuantIsa isa) {
  if (!Int4DigitsKernelApplies(layout)) return false;
  if (DigitsVnniRuns()) return rows == at::kFloat;
  return isa == QuantIsa::kAvx2 && Int4DigitsAvx2Runs();
}

PackedKernel ChoosePackedKernel(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias) {
  if (!QuantizedLinearApplies(x, weight, bias)) return PackedKernel::kNone;
  const loader::PackedLayout layout = *loader::PackedLayoutOf(weight);
  const int64_t rows = x.numel() / layout.in;
  if (rows < 1) return PackedKernel::kNone;
  if (Int8ActivationsEnabled() && Int8ActivationKernelRuns() && Int8ActivationKernelApplies(layout)) {
    // Prompt chunks on AMX-INT8 where it runs (int8_activation_tiles.h).
    return rows > kMostInt8ActivationVectorRows && Int8ActivationTilesRun() &&
                   Int8ActivationTilesApply(layout)
               ? PackedKernel::kInt8ActivationTiles
               : PackedKernel::kInt8Activations;
  }
  const QuantIsa isa = DetectQuantIsa();
  const bool bf16_rows = x.scalar_type() == at::kBFloat16;
  if (rows > QuantizedLinearMaxRows(isa, layout, x.scalar_type())) {
    // Prompt chunks of float32 rows: 4-bit and 8-bit weights in groups of 64 or more on AMX
    // tiles (quantized_tiles.h). `placer-bench-model quantized-products --threads 2` (the small
    // preset's layers, ms per pass, an Emerald Rapids VM whose two vCPUs share one AMX unit),
    // tiles against each task's rows unpacked for the F32 prompt-chunk kernel or sgemm: groups of
    // 128 at 17 rows 18-22 vs 26-28, 32 rows 23-24 vs 39-40, 64 rows 29-39 vs 47, 128 rows 65-72
    // vs 80-90; groups of 32 (a flush of the tiles' sums every 12 tdpbf16ps) 30-33 vs 38-40 at 32
    // rows but 53-57 vs 54-55 at 64 and 110-111 vs 99-102 at 128, so they stay where they were.
    // Else, where the F32 prompt-chunk kernel takes them, each task's
    // weight rows unpacked for it (UnpackedQuantizedLinear; on a Zen 5 EPYC a small-preset
    // int4 prefill of 64 rows took 29-31 ms so against 34-40 by digits, of 128 rows 51 against
    // 61-64); else vpdpbusd on the decode kernel's digits where it runs
    // (quantized_int4_digit_chunks.h); else the weight unpacked for a dense product.
    // BF16 rows (a BF16 checkpoint under --quantize int4) take the tiles with one part, up to
    // 64 rows (same tool and runs, BF16 columns, tiles against unpack + oneDNN's GEMM): groups
    // of 128 at 17 rows 13-14 vs 22-28, 32 rows 12-16 vs 29-34, 64 rows 27-30 vs 31-48, 128 rows
    // 42-47 vs 42-44; groups of 32 at 64 rows 31-40 vs 43-45, at 128 rows 73-104 vs 33-43.
    // 8-bit weights take the same tiles (codes widened to BF16, exact) where they meet the same
    // rule (same tool, --schemes int8, one scale per row; a noisy spell of the host): F32 rows
    // at 32 rows 32 vs 48 unpacking each task's rows, 64 rows 52 vs 56, 128 rows 98 vs 115;
    // BF16 rows at 17 rows 22 vs 34 unpack + GEMM, 32 rows 35 vs 49, 64 rows 34 vs 62.
    // F32 rows of groups of 128s on AMX-INT8: each input as three digits (digit_tiles.h), half
    // the tile products of the three BF16 parts below. Same tool (--schemes int4_g128 int8, the
    // latter one scale per row), digits vs BF16 tiles: int4 at 17 rows 18 vs 24, 32 rows 17 vs
    // 22, 64 rows 33 vs 31, 128 rows 46 vs 61; int8 20 vs 27, 15 vs 22, 24 vs 32, 61 vs 81; the
    // small preset's 64-token prefill (placer-bench-model decode, PLACER_DIGIT_TILES=1 / 0)
    // int4 45-47 vs 49-54 ms, int8 43-47 vs 52-54.
    if (!bf16_rows && DigitTilesRun() && DigitTilesApply(layout)) return PackedKernel::kDigitTiles;
    const bool tiles_take = bf16_rows ? rows <= kMostQuantizedTileBf16Rows : layout.group_size >= 64;
    if (tiles_take && QuantizedTilesKernelRuns() && QuantizedTilesKernelApplies(layout)) {
      return PackedKernel::kQuantizedTiles;
    }
    const bool f32_prompt_chunk = isa == QuantIsa::kAvx512 && PromptChunkLinearTakes(rows);
    return !bf16_rows && !f32_prompt_chunk && DigitsVnniRuns() && Int4DigitsKernelApplies(layout)
               ? PackedKernel::kInt4DigitChunks
               : PackedKernel::kNone;
  }
  if (bf16_rows && PackedBf16KernelsRun() && Int4Bf16KernelApplies(layout)) {
    return PackedKernel::kInt4Bf16;
  }
  // BF16 rows of 8-bit weights in groups of 128s: the digits kernel before the vdpbf16ps one.
  // `placer-bench-model quantized-products --threads 2 --schemes int8` (the small preset's
  // layers, one scale per row, an Emerald Rapids VM), ms per pass, digits vs vdpbf16ps vs the
  // AVX-512 float kernel: 1 row 2.46 vs 4.79 vs 3.12, 2 rows 3.86 vs 6.74 vs 4.08, 4 rows 5.7
  // vs 10.1 vs 5.2, 8 rows 10.5 vs 20.9 vs 13.0, 16 rows 24.0 vs 40.2 vs 25.7; the ~1.1B int8
  // decode step 0.84-0.90 of the vdpbf16ps kernel's (bench/analysis.md). Float32 rows keep the
  // float kernel: there the digits' three vpdpbusd per 64 inputs and row (one port on this CPU)
  // cost more than its fma per weight from 2 rows on (4.0 vs 3.6 ms, 16 rows 22.5 vs 15.9; a
  // small-preset decode step of 8 sequences 1.19x as long), for 0.93x at one row.
  if (bf16_rows && Int8DigitsKernelRuns() && Int8DigitsKernelApplies(layout)) {
    return PackedKernel::kInt8Digits;
  }
  if (bf16_rows && PackedBf16KernelsRun() && Int8Bf16KernelApplies(layout)) {
    return PackedKernel::kInt8Bf16;
  }
  if (DecodeDigitsTake(layout, x.scalar_type(), isa)) return PackedKernel::kInt4Digits;
  return PackedKernel::kGeneral;
}

std::atomic<bool> int8_activations{false};

}  // namespace

at::Tensor QuantizedLinearKernel(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, QuantIsa isa) {
  TORCH_CHECK(isa != QuantIsa::kNone && Runs(isa), "QuantizedLinearKernel: this CPU cannot run ",
              QuantIsaName(isa));
  TORCH_CHECK(QuantizedLinearApplies(x, weight, bias), "QuantizedLinearKernel: unsupported operands");
  return RunGeneralKernel(x, {weight}, {bias}, isa)[0];
}

void SetInt8Activations(bool enabled) { int8_activations.store(enabled); }
bool Int8ActivationsEnabled() { return int8_activations.load(); }

bool UsesInt8Activations(const at::Tensor& weight) {
  if (!Int8ActivationsEnabled() || !Int8ActivationKernelRuns() || !weight.device().is_cpu()) {
    return false;
  }
  const std::optional<loader::PackedLayout> layout = loader::PackedLayoutOf(weight);
  return layout && Int8ActivationKernelApplies(*layout);
}

at::Tensor QuantizedLinearInt8Activations(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias, Int8ActivationIsa isa) {
  const std::vector<Int8ActivationIsa>& runnable = RunnableInt8ActivationIsas();
  TORCH_CHECK(std::find(runnable.begin(), runnable.end(), isa) != runnable.end(),
              "QuantizedLinearInt8Activations: this CPU does not run ", Int8ActivationIsaName(isa));
  TORCH_CHECK(QuantizedLinearApplies(x, weight, bias) &&
                  Int8ActivationKernelApplies(*loader::PackedLayoutOf(weight)),
              "QuantizedLinearInt8Activations: unsupported operands");
  return RunInt8ActivationKernel(x, {weight}, {bias}, isa)[0];
}

bool UsesInt8ActivationTiles(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return UsesInt8Activations(weight) && Int8ActivationTilesRun() &&
         QuantizedLinearApplies(x, weight, bias) &&
         Int8ActivationTilesApply(*loader::PackedLayoutOf(weight));
}

at::Tensor QuantizedLinearInt8ActivationTiles(const at::Tensor& x, const at::Tensor& weight,
                                              const at::Tensor& bias) {
  TORCH_CHECK(Int8ActivationTilesRun() && QuantizedLinearApplies(x, weight, bias) &&
                  Int8ActivationTilesApply(*loader::PackedLayoutOf(weight)),
              "QuantizedLinearInt8ActivationTiles: a packed host weight whose activation blocks "
              "are 64 or 128 inputs, a CPU with AMX-INT8");
  return RunPackedKernel(PackedKernel::kInt8ActivationTiles, x, {weight}, {bias})[0];
}

bool UsesInt4DigitsKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return QuantizedLinearApplies(x, weight, bias) &&
         DecodeDigitsTake(*loader::PackedLayoutOf(weight), x.scalar_type(), DetectQuantIsa());
}

at::Tensor QuantizedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const PackedKernel kernel = ChoosePackedKernel(x, weight, bias);
  if (kernel != PackedKernel::kNone) return RunPackedKernel(kernel, x, {weight}, {bias})[0];
  return UnpackedQuantizedLinear(x, weight, bias);
}

std::vector<at::Tensor> QuantizedLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                         const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(weights.size() == biases.size(), "QuantizedLinears: one bias (or none) per weight");
  const PackedKernel kernel =
      weights.empty() ? PackedKernel::kNone : ChoosePackedKernel(x, weights[0], biases[0]);
  bool together = kernel != PackedKernel::kNone && PackedWeightsShareInputs(weights);
  for (size_t i = 1; together && i < weights.size(); ++i) {
    together = ChoosePackedKernel(x, weights[i], biases[i]) == kernel;
  }
  if (together) return RunPackedKernel(kernel, x, weights, biases);
  bool all_unpacked = kernel == PackedKernel::kNone;
  for (size_t i = 1; all_unpacked && i < weights.size(); ++i) {
    all_unpacked = ChoosePackedKernel(x, weights[i], biases[i]) == PackedKernel::kNone;
  }
  if (all_unpacked) return UnpackedQuantizedLinears(x, weights, biases);
  std::vector<at::Tensor> ys;
  for (size_t i = 0; i < weights.size(); ++i) ys.push_back(QuantizedLinear(x, weights[i], biases[i]));
  return ys;
}

}  // namespace placer::model
