// The packed form of a quantized linear weight, torch-free so the planner can size it without
// loading anything. One layout serves `--quantize` and (later) the pre-quantized checkpoint
// formats, which are repacked into it at load.
//
// A packed weight of a linear map with `out` outputs and `in` inputs is `out` rows of
// `groups = in / group_size` blocks, each block:
//   float32 scale s, float32 offset m, then group_size codes q:
//     8 bits: one int8 per input, in order;
//     4 bits: group_size / 2 bytes; every 32 inputs take 16 bytes, byte j holding input j in
//             its low nibble and input j + 16 in its high nibble (unsigned codes 0..15).
// The weight is w = fma(q, s, m) in float32 (exactly that rounding). Symmetric schemes store
// m = 0 (int8) or m = -8·s (int4); an integer zero point z is m = -z·s, exact in float32 for
// the fp16 scales GPTQ and AWQ store.
//
// In memory it is a 3-D tensor [out, groups, block bytes]: int8 (kChar) for 8 bits, uint8
// (kByte) for 4 bits, so the layout is read off the tensor alone (loader/quantized_weight.h).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::loader {

// --quantize: which weights it covers is the architecture description's (decoder-layer
// linear weights, TensorDescription::linear; the lm_head's weight, TensorDescription::lm_head,
// only under --quantize-lm-head); embeddings, norms and biases keep the compute dtype.
enum class QuantScheme { kNone, kInt8, kInt4 };

struct QuantizeOptions {
  QuantScheme scheme = QuantScheme::kNone;
  // Inputs per scale: int4 32 or 128 (the default); int8 0 = one scale per output channel.
  std::int64_t group_size = 0;
  // --quantize-lm-head: the lm_head's scheme, at its default grouping (int8: one scale per
  // output channel; int4: groups of 128), so that the head can stay finer than the layers
  // (llama.cpp's Q4_0 keeps its output at Q6_K). Set alone, it packs the head only: the one
  // weight a pre-quantized checkpoint usually leaves in float, and the largest.
  QuantScheme lm_head = QuantScheme::kNone;
  // --quantize-activations int8: packed weights multiply int8 activations (per block of 32 or
  // 128 inputs) on AVX512-VNNI or AVX-VNNI CPUs where model/quantized_vnni.h's kernel applies;
  // the packed bytes are the same.
  bool int8_activations = false;

  bool enabled() const { return scheme != QuantScheme::kNone; }
  bool quantizes_lm_head() const { return lm_head != QuantScheme::kNone; }
  // Whether any weight is packed at load: the layers', the head's, or both.
  bool packs_any() const { return enabled() || quantizes_lm_head(); }
  // The options the lm_head's weight is packed with.
  QuantizeOptions LmHead() const {
    return {lm_head, lm_head == QuantScheme::kInt4 ? 128 : 0, QuantScheme::kNone, int8_activations};
  }
};

// "none"/"" | "int8" | "int4"; group_size 0 = the scheme's default; lm_head "none"/"" |
// "int8" | "int4" (with or without a scheme for the layers). Errors name the flag.
absl::StatusOr<QuantizeOptions> ParseQuantizeOptions(absl::string_view scheme,
                                                     std::int64_t group_size,
                                                     absl::string_view lm_head = "none",
                                                     absl::string_view activations = "none");
// "int8 (one scale per output channel)", "int4 (groups of 128); lm_head int8 (one scale per
// output channel)", "lm_head int8 (one scale per output channel)"; "none".
std::string DescribeQuantizeOptions(const QuantizeOptions& options);

inline constexpr std::int64_t kPackedBlockHeaderBytes = 8;  // float32 scale, float32 offset

struct PackedLayout {
  int bits = 0;  // 4 or 8
  std::int64_t out = 0, in = 0, group_size = 0;

  std::int64_t groups() const { return in / group_size; }
  std::int64_t block_bytes() const { return kPackedBlockHeaderBytes + group_size * bits / 8; }
  std::uint64_t bytes() const {
    return static_cast<std::uint64_t>(out) * static_cast<std::uint64_t>(groups()) *
           static_cast<std::uint64_t>(block_bytes());
  }
};

// The layout a weight [out, in] gets under `options` (enabled); an error naming `tensor`
// when the group size does not divide `in`, or `in` is not a multiple of 32 for int4.
absl::StatusOr<PackedLayout> PackedLayoutFor(const QuantizeOptions& options, std::int64_t out,
                                             std::int64_t in, absl::string_view tensor);

// Checks a layout a checkpoint or tensor claims: bits 4 or 8, positive sizes, group_size
// dividing in, 4-bit groups a multiple of 32. The error names `what`.
absl::Status ValidatePackedLayout(const PackedLayout& layout, absl::string_view what);

}  // namespace placer::loader
