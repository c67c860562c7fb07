// libFuzzer target: see fuzz_entry_points.h.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entry_points.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return placer::fuzz::FuzzQuantizeConfig(data, size);
}
