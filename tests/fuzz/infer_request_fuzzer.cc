// libFuzzer target: see infer_request_fuzz_entry_point.h.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/infer_request_fuzz_entry_point.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return placer::fuzz::FuzzInferRequest(data, size);
}
