#include "placement/prequantized_summary.h"

#include "absl/strings/str_cat.h"

namespace placer::placement {
namespace {

std::string FormatAndFile(const loader::PrequantizedFormat& format) {
  const std::string& file = format.source;
  return absl::StrCat(format.Describe(), ", from ", file.substr(file.find_last_of('/') + 1));
}

}  // namespace

std::string PrequantizedSummary(const loader::PrequantizedFormat& format,
                                std::optional<loader::DType> compute_dtype) {
  const std::string kept =
      compute_dtype ? std::string(loader::DTypeName(*compute_dtype)) : "their own dtype";
  return absl::StrCat("checkpoint ", FormatAndFile(format),
                      ": decoder-layer linear weights repacked at load, sized and held packed; "
                      "embeddings, norms, biases and lm_head in ",
                      kept,
                      format.unquantized.empty()
                          ? ""
                          : absl::StrCat("; linears the checkpoint left unquantized (",
                                         format.unquantized.description(), ") in ", kept));
}

nlohmann::ordered_json PrequantizedJson(const loader::PrequantizedFormat& format,
                                        const std::string& summary) {
  nlohmann::ordered_json json;
  json["checkpoint"] = FormatAndFile(format);
  json["covers"] = "decoder-layer linear weights";
  json["summary"] = summary;
  return json;
}

}  // namespace placer::placement
