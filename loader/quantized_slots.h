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
// weight, QuantizeOptions::LmHead for the lm_head's under --quantize-lm-head (a tied head's is
// the token embedding, so that table is packed too: HoldsLmHead); nullopt when the slot keeps
// the compute dtype.
std::optional<QuantizeOptions> SlotQuantization(const TensorDescription& slot,
                                                const QuantizeOptions& quantize);
// The same rule on a present slot's two facts, as the run time's block specs keep them: its
// description's `linear`, and HoldsLmHead.
std::optional<QuantizeOptions> SlotQuantization(LinearWeight linear, bool lm_head,
                                                const QuantizeOptions& quantize);

// Whether the slot holds the lm_head's weight: the head's own slot, tied or not, or the
// embedding table a tied head reads.
bool HoldsLmHead(const TensorDescription& slot);

// How a slot that SlotQuantization packs stores its weight ([out, in] or [in, out]).
LinearWeight PackedOrientation(const TensorDescription& slot);

}  // namespace placer::loader
