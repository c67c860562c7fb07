#include "loader/quantized_slots.h"

namespace placer::loader {

std::optional<QuantizeOptions> SlotQuantization(LinearWeight linear, bool lm_head,
                                                const QuantizeOptions& quantize) {
  if (lm_head) {
    if (!quantize.quantizes_lm_head()) return std::nullopt;
    return quantize.LmHead();
  }
  if (!quantize.enabled() || linear == LinearWeight::kNone) return std::nullopt;
  return quantize;
}

bool HoldsLmHead(const TensorDescription& slot) { return slot.lm_head || slot.tied_lm_head_table; }

std::optional<QuantizeOptions> SlotQuantization(const TensorDescription& slot,
                                                const QuantizeOptions& quantize) {
  if (!slot.present) return std::nullopt;
  return SlotQuantization(slot.linear, HoldsLmHead(slot), quantize);
}

LinearWeight PackedOrientation(const TensorDescription& slot) {
  return HoldsLmHead(slot) ? LinearWeight::kOutIn : slot.linear;
}

}  // namespace placer::loader
