// The infer_request libFuzzer target's entry point, also run by
// tests/server/inference_request_test.cc without libFuzzer. Feeds untrusted bytes to the Open
// Inference Protocol's request parsing (server/inference_request.h): as a ModelInferRequest
// (BYTES framing of raw_input_contents, typed contents, parameters, the sampling_parameters
// JSON), as a raw BYTES tensor, and as sampling_parameters text. It must never crash, and a
// request it accepts has exactly one prompt.
#pragma once

#include <cstddef>
#include <cstdint>

namespace placer::fuzz {

int FuzzInferRequest(const std::uint8_t* data, std::size_t size);

}  // namespace placer::fuzz
