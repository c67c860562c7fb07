#include "loader/quantized_layout.h"

#include "absl/strings/str_cat.h"

namespace placer::loader {

namespace {

absl::StatusOr<QuantizeOptions> ParseLayerOptions(absl::string_view scheme,
                                                  std::int64_t group_size) {
  QuantizeOptions options;
  if (scheme.empty() || scheme == "none") {
    if (group_size != 0) {
      return absl::InvalidArgumentError("--quantize-group-size needs --quantize int4 or int8");
    }
    return options;
  }
  if (scheme == "int8") {
    options.scheme = QuantScheme::kInt8;
    if (group_size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--quantize-group-size ", group_size, ": must be positive (0: per output channel)"));
    }
    options.group_size = group_size;
    return options;
  }
  if (scheme == "int4") {
    options.scheme = QuantScheme::kInt4;
    if (group_size == 0) group_size = 128;
    if (group_size != 32 && group_size != 128) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--quantize-group-size ", group_size, ": int4 takes groups of 32 or 128 inputs"));
    }
    options.group_size = group_size;
    return options;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--quantize '", scheme, "': expected none, int8 or int4"));
}

}  // namespace

absl::StatusOr<QuantizeOptions> ParseQuantizeOptions(absl::string_view scheme,
                                                     std::int64_t group_size,
                                                     absl::string_view lm_head,
                                                     absl::string_view activations) {
  absl::StatusOr<QuantizeOptions> options = ParseLayerOptions(scheme, group_size);
  if (!options.ok()) return options;
  if (activations == "int8") {
    options->int8_activations = true;
  } else if (!activations.empty() && activations != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--quantize-activations '", activations, "': expected none or int8"));
  }
  if (lm_head.empty() || lm_head == "none") return options;
  if (lm_head == "int8") {
    options->lm_head = QuantScheme::kInt8;
  } else if (lm_head == "int4") {
    options->lm_head = QuantScheme::kInt4;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--quantize-lm-head '", lm_head, "': expected none, int8 or int4"));
  }
  return options;
}

namespace {

std::string DescribeScheme(const QuantizeOptions& options) {
  switch (options.scheme) {
    case QuantScheme::kNone: return "none";
    case QuantScheme::kInt8:
      return options.group_size == 0 ? "int8 (one scale per output channel)"
                                     : absl::StrCat("int8 (groups of ", options.group_size, ")");
    case QuantScheme::kInt4: return absl::StrCat("int4 (groups of ", options.group_size, ")");
  }
  return "none";
}

}  // namespace

std::string DescribeQuantizeOptions(const QuantizeOptions& options) {
  if (!options.quantizes_lm_head()) return DescribeScheme(options);
  if (!options.enabled()) return absl::StrCat("lm_head ", DescribeScheme(options.LmHead()));
  return absl::StrCat(DescribeScheme(options), "; lm_head ", DescribeScheme(options.LmHead()));
}

absl::Status ValidatePackedLayout(const PackedLayout& layout, absl::string_view what) {
  if (layout.bits != 4 && layout.bits != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", layout.bits, "-bit weights are not supported (4 or 8)"));
  }
  if (layout.out <= 0 || layout.in <= 0 || layout.group_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": sizes must be positive (out ", layout.out, ", in ", layout.in, ", group size ",
        layout.group_size, ")"));
  }
  if (layout.in % layout.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": group size ", layout.group_size,
                                                   " does not divide the ", layout.in, " inputs"));
  }
  if (layout.bits == 4 && layout.group_size % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": 4-bit groups must be a multiple of 32 inputs (group size ", layout.group_size,
        ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PackedLayout> PackedLayoutFor(const QuantizeOptions& options, std::int64_t out,
                                             std::int64_t in, absl::string_view tensor) {
  PackedLayout layout;
  layout.bits = options.scheme == QuantScheme::kInt4 ? 4 : 8;
  layout.out = out;
  layout.in = in;
  layout.group_size = options.group_size == 0 ? in : options.group_size;
  absl::Status valid =
      ValidatePackedLayout(layout, absl::StrCat("--quantize ", DescribeQuantizeOptions(options),
                                                " of tensor ", tensor));
  if (!valid.ok()) return valid;
  return layout;
}

}  // namespace placer::loader
