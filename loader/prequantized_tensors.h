// Which checkpoint tensors stand for each decoder-layer linear weight (and the lm_head under
// GPTQ's `lm_head: true`) of a pre-quantized checkpoint (loader/prequantized_config.h), checked
// by name, dtype and shape against what config.json implies, before a byte is read.
// Torch-free: the loader (Checkpoint::Open) and the planner (placement/model_module_tree.cc)
// both derive the slots from it; the repacking itself is loader/prequantized_repack.h's.
//
// For a slot "P.weight" of a linear map with `out` outputs and `in` inputs, `groups` scales per
// output (1 for per-channel / group_size -1):
//   GPTQ:  P.qweight I32 [in·bits/32, out] (inputs packed low bits first), P.qzeros I32
//          [groups, out·bits/32] (outputs packed), P.scales float [groups, out], P.g_idx I32
//          [in] (optional);
//   AWQ:   P.qweight I32 [in, out/8], P.qzeros I32 [groups, out/8] (outputs packed in the order
//          0 2 4 6 1 3 5 7), P.scales float [groups, out];
//   compressed-tensors pack-quantized: P.weight_packed I32 [out, in·bits/32] (inputs packed,
//          codes stored + 2^(bits-1)), P.weight_scale float [out, groups], P.weight_shape int
//          [2], P.weight_zero_point int8 [out, groups] (required when asymmetric),
//          P.weight_g_idx I32 [in] (required with actorder "group");
//   compressed-tensors int-quantized: P.weight I8 [out, in], P.weight_scale float [out, 1],
//          P.weight_zero_point int8 [out, 1] (optional).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "loader/architectures/architecture.h"
#include "loader/dtype.h"
#include "loader/model_config.h"
#include "loader/quantized_layout.h"

namespace placer::loader {

struct StoredTensor {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
};

struct QuantizedLinearSource {
  std::string slot;  // "model.layers.0.self_attn.q_proj.weight"
  PrequantizedFormat format;
  PackedLayout layout;  // what it is repacked into (and planned as)
  // Checkpoint tensor names by role; empty when this checkpoint has none for the role.
  std::string codes;        // qweight / weight_packed / weight
  std::string zeros;        // qzeros / weight_zero_point
  std::string scales;       // scales / weight_scale
  std::string group_index;  // GPTQ g_idx, compressed-tensors weight_g_idx
  std::string shape;        // compressed-tensors weight_shape
};

struct QuantizedLinears {
  std::map<std::string, QuantizedLinearSource> by_slot;
  std::set<std::string> parts;  // every checkpoint tensor the sources read
};

// The packed layout a linear slot of a checkpoint in `format` is repacked into (and planned
// as); an error naming the slot when placer's layout cannot hold it (4-bit inputs not a
// multiple of 32, a group size that does not divide the inputs).
absl::StatusOr<PackedLayout> PrequantizedSlotLayout(const TensorDescription& slot,
                                                    const PrequantizedFormat& format,
                                                    absl::string_view where);

// "model.layers.0.mlp.down_proj" from its slot "model.layers.0.mlp.down_proj.weight".
inline absl::string_view ModuleOf(absl::string_view slot) {
  return absl::StripSuffix(slot, ".weight");
}

// The format `slot` of `block` is stored in by a checkpoint of `format`, nullptr when it is a
// float tensor: a decoder-layer linear's from format.ForModule (an error when two config
// groups claim it), the untied lm_head's under GPTQ's `lm_head: true`.
absl::StatusOr<const PrequantizedFormat*> StoredFormat(const BlockDescription& block,
                                                       const TensorDescription& slot,
                                                       const PrequantizedFormat& format);

// The linears `format` leaves unquantized (format.unquantized, or no config group targets
// them) are not sources: they are float `.weight`s, checked like any other tensor. Each
// source carries its own linear's format.
// `find` gives a checkpoint tensor by canonical name, or nullptr. `where` names the checkpoint
// in errors. Each linear slot's parts must all be there with the dtype and shape above; its
// `.weight` must not be (except int-quantized's int8 one). A slot whose layout placer cannot
// hold (4-bit inputs not a multiple of 32, a group size that does not divide) is refused.
absl::StatusOr<QuantizedLinears> MatchQuantizedLinears(
    const ArchitectureDescription& architecture, const PrequantizedFormat& format,
    const std::function<const StoredTensor*(const std::string&)>& find, absl::string_view where);

}  // namespace placer::loader
