// Packed quantized linear weights as tensors (the layout: loader/quantized_layout.h): made
// from a float weight at load (--quantize), read back to float for prompt chunks and tests.
// The few-row products that read them directly are model/quantized_linear.h's.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "absl/status/statusor.h"
#include "loader/quantized_layout.h"

namespace placer::loader {

// The layout of a packed weight tensor (3-D, kChar for 8 bits or kByte for 4, contiguous
// blocks whose size matches a valid layout); nullopt for anything else (a float weight).
std::optional<PackedLayout> PackedLayoutOf(const at::Tensor& tensor);
inline bool IsPackedWeight(const at::Tensor& tensor) { return PackedLayoutOf(tensor).has_value(); }

// Quantizes a float weight [out, in] (any floating dtype, CPU) into `layout`, on the CPU:
//   8 bits: symmetric, s = max|w| / 127 per group, q = round(w / s) in [-127, 127], m = 0;
//   4 bits: asymmetric, s = (max - min) / 15, z = round(-min / s), q = clamp(round(w / s) + z,
//           0, 15), m = -z·s (as bitsandbytes' and GPTQ's min-max grids do).
// in float32, round() to nearest with ties to even. A group of zeros gets s = 0 and codes 0; a
// group holding a NaN gets a NaN scale (so it dequantizes to NaN). Row by row, in parallel, with
// no copy of the whole weight. Errors (shape not [out, in], weight not in host memory) name
// `tensor`.
absl::StatusOr<at::Tensor> QuantizeLinearWeight(const at::Tensor& weight,
                                                const PackedLayout& layout,
                                                const std::string& tensor);

// Packs codes and per-group scales and offsets given explicitly (the pre-quantized formats
// repack into this): codes int32 [out, in] as stored (4 bits: 0..15; 8 bits: -128..127),
// scales and offsets float32 [out, groups]. Requires valid shapes and code ranges.
at::Tensor PackLinearWeight(const at::Tensor& codes, const at::Tensor& scales,
                            const at::Tensor& offsets, const PackedLayout& layout);

// An all-zero packed weight of `layout` ([out, groups, block bytes], kChar for 8 bits, kByte
// for 4) on huge pages where the kernel gives them: what the packers below fill row by row.
at::Tensor ZeroPackedWeight(const PackedLayout& layout);

// One output row of PackLinearWeight: `codes` [in] as there, its groups' `scales` and
// `offsets` [groups], into `row` (groups · block_bytes bytes, zeroed: 4-bit codes are or-ed in).
// For callers that make the codes a row at a time (the pre-quantized repack).
void PackLinearRow(const int32_t* codes, const float* scales, const float* offsets,
                   const PackedLayout& layout, uint8_t* row);

// w = fma(q, s, m) for every input, as float32 [out, in] converted to `dtype`, into `out`
// when given (resized; a reused buffer) else a new tensor. Requires IsPackedWeight.
at::Tensor DequantizeLinearWeight(const at::Tensor& packed, at::ScalarType dtype,
                                  at::Tensor* out = nullptr);

// Output rows [n0, n1) of that dequantization into `out` (float32 or BF16 [out, in], already
// sized), on the calling thread: for callers that bring their own threads.
void DequantizeLinearWeightRows(const at::Tensor& packed, at::Tensor& out, int64_t n0, int64_t n1);

// The same weights with tensor operations only, on whatever device `packed` is (a real GPU
// has no packed kernels yet): q · s + m in float32 (rounded twice where the CPU path fuses),
// then `dtype`.
at::Tensor DequantizeLinearWeightOnDevice(const at::Tensor& packed, at::ScalarType dtype);

}  // namespace placer::loader
