// libFuzzer target: see stage_wire_fuzz_entry_point.h.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/stage_wire_fuzz_entry_point.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return placer::fuzz::FuzzStageWire(data, size);
}
