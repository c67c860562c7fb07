// Which weights --quantize packs, and with which options: the one rule that the planner (sizes,
// placement/model_module_tree.h) and the run time (binding, runtime/bound_block.h) share.
// Torch-free.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "loader/architectures/architecture.h"
#include "loader/quantized_layout.h"

namespace placer::loader {

// The options `slot` is packed with under `quantize`: the layers' for a decoder layer's linear
// weight, QuantizeOptions::LmHead for the lm_head's under --quantize-lm-head; nullopt when the
// slot keeps the compute dtype.
std::optional<QuantizeOptions> SlotQuantization(const TensorDescription& slot,
                                                const QuantizeOptions& quantize);
// The same rule on a present slot's two facts, as the run time's block specs keep them: its
// description's `linear`, and whether it is an untied lm_head (a tied one is never packed).
std::optional<QuantizeOptions> SlotQuantization(LinearWeight linear, bool untied_lm_head,
                                                const QuantizeOptions& quantize);

// How a slot that SlotQuantization packs stores its weight ([out, in] or [in, out]).
LinearWeight PackedOrientation(const TensorDescription& slot);

// --quantize-lm-head on an architecture whose lm_head is tied to the token embedding: an error
// naming both tensors (the lookup would read the packed bytes). OK otherwise.
absl::Status CheckQuantizableLmHead(const ArchitectureDescription& architecture,
                                    const QuantizeOptions& quantize);

}  // namespace placer::loader
