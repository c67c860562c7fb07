#include "placement/prequantized_summary.h"

#include "absl/strings/str_cat.h"

namespace placer::placement {
namespace {

std::string FormatAndFile(const loader::PrequantizedFormat& format) {
  const std::string& file = format.source;
  return absl::StrCat(format.Describe(), ", from ", file.substr(file.find_last_of('/') + 1));
}

// What the checkpoint stores quantized (and placer holds packed).
std::string Covered(const loader::PrequantizedFormat& format) {
  return format.quantized_lm_head ? "decoder-layer linear weights and the lm_head"
                                  : "decoder-layer linear weights";
}

}  // namespace

std::string PrequantizedSummary(const loader::PrequantizedFormat& format,
                                std::optional<loader::DType> compute_dtype) {
  const std::string kept =
      compute_dtype ? std::string(loader::DTypeName(*compute_dtype)) : "their own dtype";
  return absl::StrCat("checkpoint ", FormatAndFile(format), ": ", Covered(format),
                      " repacked at load, sized and held packed; embeddings, norms, biases",
                      format.quantized_lm_head ? "" : " and lm_head", " in ", kept,
                      format.unquantized.empty()
                          ? ""
                          : absl::StrCat("; linears the checkpoint left unquantized (",
                                         format.unquantized.description(), ") in ", kept));
}

nlohmann::ordered_json PrequantizedJson(const loader::PrequantizedFormat& format,
                                        const std::string& summary) {
  nlohmann::ordered_json json;
  json["checkpoint"] = FormatAndFile(format);
  json["covers"] = Covered(format);
  json["summary"] = summary;
  return json;
}

}  // namespace placer::placement
