#include "loader/quantized_slots.h"

#include "absl/strings/str_cat.h"

namespace placer::loader {

std::optional<QuantizeOptions> SlotQuantization(LinearWeight linear, bool untied_lm_head,
                                                const QuantizeOptions& quantize) {
  if (!quantize.enabled()) return std::nullopt;
  if (untied_lm_head) {
    if (!quantize.quantizes_lm_head()) return std::nullopt;
    return quantize.LmHead();
  }
  if (linear == LinearWeight::kNone) return std::nullopt;
  return quantize;
}

std::optional<QuantizeOptions> SlotQuantization(const TensorDescription& slot,
                                                const QuantizeOptions& quantize) {
  if (!slot.present || (slot.lm_head && !slot.tied_to.empty())) return std::nullopt;
  return SlotQuantization(slot.linear, slot.lm_head, quantize);
}

LinearWeight PackedOrientation(const TensorDescription& slot) {
  return slot.lm_head ? LinearWeight::kOutIn : slot.linear;
}

absl::Status CheckQuantizableLmHead(const ArchitectureDescription& architecture,
                                    const QuantizeOptions& quantize) {
  if (!quantize.quantizes_lm_head()) return absl::OkStatus();
  for (const TensorDescription* slot : architecture.Slots()) {
    if (slot->lm_head && !slot->tied_to.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--quantize-lm-head: ", slot->name, " is tied to ", slot->tied_to,
          " (tie_word_embeddings), which the embedding lookup reads as it is; a tied head "
          "stays in the compute dtype (drop --quantize-lm-head)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace placer::loader
