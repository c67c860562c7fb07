#include "loader/prequantized_tensors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

std::string ShapeString(const std::vector<std::int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class PartChecker {
 public:
  PartChecker(const std::function<const StoredTensor*(const std::string&)>& find,
              absl::string_view where)
      : find_(find), where_(where) {}

  // The part's name when present with one of `dtypes` and `shape`; "" when absent and
  // optional; an error naming it otherwise.
  absl::StatusOr<std::string> Check(const std::string& name, const std::vector<DType>& dtypes,
                                    const std::vector<std::int64_t>& shape, bool required) const {
    const StoredTensor* stored = find_(name);
    if (stored == nullptr) {
      if (!required) return std::string();
      return absl::NotFoundError(absl::StrCat(where_, ": tensor \"", name, "\" is missing; ",
                                              format_->source, " (", format_->Describe(),
                                              ") requires it"));
    }
    bool dtype_ok = false;
    std::vector<std::string> names;
    for (DType dtype : dtypes) {
      dtype_ok = dtype_ok || stored->dtype == dtype;
      names.emplace_back(DTypeName(dtype));
    }
    if (!dtype_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": tensor \"", name, "\" is ", DTypeName(stored->dtype), " but ",
          format_->Describe(), " stores it as ", absl::StrJoin(names, " or ")));
    }
    if (stored->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": tensor \"", name, "\" has shape ", ShapeString(stored->shape), " but ",
          format_->Describe(), " (", format_->source, ") of a ", shape_note_, " weight implies ",
          ShapeString(shape)));
    }
    return name;
  }
  bool Has(const std::string& name) const { return find_(name) != nullptr; }
  // The slot being checked: its shape for messages and the format its parts are stored in.
  void set_slot(std::string shape_note, const PrequantizedFormat* format) {
    shape_note_ = std::move(shape_note);
    format_ = format;
  }

 private:
  const std::function<const StoredTensor*(const std::string&)>& find_;
  absl::string_view where_;
  const PrequantizedFormat* format_ = nullptr;
  std::string shape_note_;
};

const std::vector<DType> kScaleDTypes = {DType::kF16, DType::kBF16, DType::kF32};

absl::StatusOr<QuantizedLinearSource> MatchSlot(const TensorDescription& slot,
                                                const PrequantizedFormat& format,
                                                const PartChecker& parts, absl::string_view where) {
  QuantizedLinearSource source;
  source.slot = slot.name;
  source.format = format;
  PLACER_ASSIGN_OR_RETURN(source.layout, PrequantizedSlotLayout(slot, format, where));
  const std::int64_t out = source.layout.out, in = source.layout.in;
  const std::string prefix = slot.name.substr(0, slot.name.size() - std::string(".weight").size());
  const std::int64_t groups = source.layout.groups();
  const std::int64_t per_int = 32 / format.bits;
  auto packable = [&](std::int64_t n, const char* what) -> absl::Status {
    if (n % per_int == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", prefix, ": ", n, " ", what, " do not pack into 32-bit words of ", per_int,
        " ", format.bits, "-bit codes",
        slot.lm_head ? absl::StrCat(" (", format.source, " quantizes the lm_head: lm_head: true)")
                     : ""));
  };
  switch (format.method) {
    case PrequantizedMethod::kGptq: {
      PLACER_RETURN_IF_ERROR(packable(in, "inputs"));
      PLACER_RETURN_IF_ERROR(packable(out, "outputs"));
      PLACER_ASSIGN_OR_RETURN(source.codes, parts.Check(prefix + ".qweight", {DType::kI32},
                                                        {in / per_int, out}, true));
      PLACER_ASSIGN_OR_RETURN(source.zeros, parts.Check(prefix + ".qzeros", {DType::kI32},
                                                        {groups, out / per_int}, true));
      PLACER_ASSIGN_OR_RETURN(source.scales,
                              parts.Check(prefix + ".scales", kScaleDTypes, {groups, out}, true));
      PLACER_ASSIGN_OR_RETURN(source.group_index,
                              parts.Check(prefix + ".g_idx", {DType::kI32}, {in}, false));
      break;
    }
    case PrequantizedMethod::kAwq: {
      PLACER_RETURN_IF_ERROR(packable(out, "outputs"));
      PLACER_ASSIGN_OR_RETURN(source.codes, parts.Check(prefix + ".qweight", {DType::kI32},
                                                        {in, out / per_int}, true));
      PLACER_ASSIGN_OR_RETURN(source.zeros, parts.Check(prefix + ".qzeros", {DType::kI32},
                                                        {groups, out / per_int}, true));
      PLACER_ASSIGN_OR_RETURN(source.scales,
                              parts.Check(prefix + ".scales", kScaleDTypes, {groups, out}, true));
      break;
    }
    case PrequantizedMethod::kCompressedPacked: {
      PLACER_RETURN_IF_ERROR(packable(in, "inputs"));
      PLACER_ASSIGN_OR_RETURN(source.codes, parts.Check(prefix + ".weight_packed", {DType::kI32},
                                                        {out, in / per_int}, true));
      PLACER_ASSIGN_OR_RETURN(source.scales, parts.Check(prefix + ".weight_scale", kScaleDTypes,
                                                         {out, groups}, true));
      PLACER_ASSIGN_OR_RETURN(source.zeros, parts.Check(prefix + ".weight_zero_point",
                                                        {DType::kI8}, {out, groups},
                                                        !format.symmetric));
      PLACER_ASSIGN_OR_RETURN(source.shape, parts.Check(prefix + ".weight_shape",
                                                        {DType::kI64, DType::kI32}, {2}, true));
      PLACER_ASSIGN_OR_RETURN(source.group_index, parts.Check(prefix + ".weight_g_idx",
                                                              {DType::kI32}, {in}, format.desc_act));
      break;
    }
    case PrequantizedMethod::kCompressedInt: {
      PLACER_ASSIGN_OR_RETURN(source.codes,
                              parts.Check(prefix + ".weight", {DType::kI8}, {out, in}, true));
      PLACER_ASSIGN_OR_RETURN(source.scales,
                              parts.Check(prefix + ".weight_scale", kScaleDTypes, {out, 1}, true));
      PLACER_ASSIGN_OR_RETURN(source.zeros, parts.Check(prefix + ".weight_zero_point",
                                                        {DType::kI8}, {out, 1}, !format.symmetric));
      return source;
    }
  }
  // A stray float weight next to its quantized parts would be loaded by nobody.
  if (parts.Has(slot.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": tensor \"", slot.name, "\" is in the checkpoint, but ", format.source,
        " says it is stored quantized (", format.Describe(), ")"));
  }
  return source;
}

}  // namespace

absl::StatusOr<PackedLayout> PrequantizedSlotLayout(const TensorDescription& slot,
                                                    const PrequantizedFormat& format,
                                                    absl::string_view where) {
  const bool in_out = slot.linear == LinearWeight::kInOut;
  PackedLayout layout;
  layout.bits = format.bits;
  layout.out = slot.shape[in_out ? 1 : 0];
  layout.in = slot.shape[in_out ? 0 : 1];
  layout.group_size = format.group_size == 0 ? layout.in : format.group_size;
  PLACER_RETURN_IF_ERROR(ValidatePackedLayout(
      layout, absl::StrCat(where, ": ", format.Describe(), " (from ", format.source, ") of ",
                           slot.name, " (", layout.out, " outputs, ", layout.in, " inputs)")));
  return layout;
}

absl::StatusOr<const PrequantizedFormat*> StoredFormat(const BlockDescription& block,
                                                       const TensorDescription& slot,
                                                       const PrequantizedFormat& format) {
  if (!slot.present) return nullptr;
  if (slot.lm_head) return format.quantized_lm_head && slot.tied_to.empty() ? &format : nullptr;
  if (!block.decoder_layer() || slot.linear == LinearWeight::kNone) return nullptr;
  return format.ForModule(ModuleOf(slot.name));
}

absl::StatusOr<QuantizedLinears> MatchQuantizedLinears(
    const ArchitectureDescription& architecture, const PrequantizedFormat& format,
    const std::function<const StoredTensor*(const std::string&)>& find, absl::string_view where) {
  QuantizedLinears out;
  PartChecker parts(find, where);
  for (const BlockDescription& block : architecture.blocks) {
    for (const TensorDescription& slot : block.tensors) {
      if (slot.lm_head && format.quantized_lm_head && !slot.tied_to.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", format.source, " says the lm_head is quantized (lm_head: true), but "
            "config.json ties it to the token embedding (tie_word_embeddings): a quantized "
            "lm_head needs its own lm_head.* tensors"));
      }
      PLACER_ASSIGN_OR_RETURN(const PrequantizedFormat* stored, StoredFormat(block, slot, format));
      if (stored == nullptr) continue;  // a float tensor
      if (slot.shape.size() != 2 || !absl::EndsWith(slot.name, ".weight")) {
        return absl::InternalError(absl::StrCat("linear slot ", slot.name, " is not a 2-D .weight"));
      }
      parts.set_slot(absl::StrCat("[", slot.shape[0], ", ", slot.shape[1], "]"), stored);
      PLACER_ASSIGN_OR_RETURN(QuantizedLinearSource source, MatchSlot(slot, *stored, parts, where));
      for (const std::string* part : {&source.codes, &source.zeros, &source.scales,
                                      &source.group_index, &source.shape}) {
        if (!part->empty()) out.parts.insert(*part);
      }
      out.by_slot.emplace(slot.name, std::move(source));
    }
  }
  return out;
}

}  // namespace placer::loader
