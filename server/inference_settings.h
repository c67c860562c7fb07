// Generation settings as Triton's vLLM and TensorRT-LLM backends take them, from any of the
// three places their clients put them: request `parameters`, the `sampling_parameters` input
// (a JSON object, as the vLLM backend reads it; numbers may be written as strings, as its
// sample client does) and one-element input tensors (`max_tokens`, `temperature`, ...). They
// land in placer.v1's SamplingParams, so generation is checked and run exactly as Generate's.
// Pure protobuf, absl and nlohmann-json: fuzzed through the infer_request target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "placer/v1/placer.pb.h"

namespace placer::server::oip {

struct GenerationSettings {
  v1::SamplingParams params;
  std::optional<bool> stream;
  // Unset: the prompt leads the text of a non-streamed answer and not of a streamed one
  // (the vLLM backend's default).
  std::optional<bool> exclude_input_in_output;
  bool all_positions = false;  // logits of every position, as Forward's all_positions
};

// One value as a client wrote it; `stop` alone takes several strings.
using SettingValue =
    std::variant<bool, int64_t, uint64_t, double, std::string, std::vector<std::string>>;

// Whether `name` is a setting (or its alias: stop_words for stop, random_seed for seed).
bool IsSettingName(absl::string_view name);

// The setting names, as ModelMetadata lists the inputs.
const std::vector<std::string>& SettingNames();

// Sets `name` from `value`; INVALID_ARGUMENT naming `where` ("parameters.top_k",
// "sampling_parameters.max_tokens", "input 'temperature'") when the name is unknown or the
// value has the wrong type or range.
absl::Status ApplySetting(absl::string_view name, const SettingValue& value,
                          const std::string& where, GenerationSettings* settings);

// Every key of the JSON object in `json` (the sampling_parameters input).
absl::Status ApplySamplingParametersJson(absl::string_view json, GenerationSettings* settings);

}  // namespace placer::server::oip
