#include "placement/prequantized_summary.h"

#include "absl/strings/str_cat.h"

namespace placer::placement {
namespace {

std::string FormatAndFile(const loader::PrequantizedFormat& format) {
  const std::string& file = format.source;
  return absl::StrCat(format.Describe(), ", from ", file.substr(file.find_last_of('/') + 1));
}

// What placer holds packed: what the checkpoint stores quantized, and the head if
// --quantize-lm-head packs it at load.
std::string Covered(const loader::PrequantizedFormat& format, const loader::QuantizeOptions& at_load) {
  return format.quantized_lm_head || at_load.quantizes_lm_head()
             ? "decoder-layer linear weights and the lm_head"
             : "decoder-layer linear weights";
}

}  // namespace

std::string PrequantizedSummary(const loader::PrequantizedFormat& format,
                                std::optional<loader::DType> compute_dtype,
                                const loader::QuantizeOptions& at_load) {
  const std::string kept =
      compute_dtype ? std::string(loader::DTypeName(*compute_dtype)) : "their own dtype";
  const bool head_at_load = at_load.quantizes_lm_head() && !format.quantized_lm_head;
  return absl::StrCat(
      "checkpoint ", FormatAndFile(format), ": ",
      format.quantized_lm_head ? "decoder-layer linear weights and the lm_head"
                               : "decoder-layer linear weights",
      " repacked at load, sized and held packed; embeddings, norms",
      format.quantized_lm_head || head_at_load ? " and biases" : ", biases and lm_head", " in ",
      kept,
      head_at_load ? absl::StrCat("; lm_head packed at load, ",
                                  loader::DescribeQuantizeOptions(at_load.LmHead()),
                                  ", by --quantize-lm-head")
                   : "",
      // ignore ["lm_head"] alone has no description: the head is never quantized there.
      format.unquantized.description().empty()
          ? ""
          : absl::StrCat("; linears the checkpoint left unquantized (",
                         format.unquantized.description(), ") in ", kept));
}

nlohmann::ordered_json PrequantizedJson(const loader::PrequantizedFormat& format,
                                        const std::string& summary,
                                        const loader::QuantizeOptions& at_load) {
  nlohmann::ordered_json json;
  json["checkpoint"] = FormatAndFile(format);
  json["covers"] = Covered(format, at_load);
  if (at_load.quantizes_lm_head()) {
    json["lm_head"] = at_load.lm_head == loader::QuantScheme::kInt4 ? "int4" : "int8";
  }
  json["summary"] = summary;
  return json;
}

}  // namespace placer::placement
