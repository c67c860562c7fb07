// The stage_wire libFuzzer target's entry point, also run by tests/runtime/stage_wire_test.cc
// without libFuzzer over the saved inputs (tests/fuzz/regressions/stage_wire). Feeds the bytes
// one placerd of a pipeline group takes from another: a message header
// (runtime/stage_header.h) and the step's layout ints (model/stage_layout_parse.h), or a
// worker's published memory figures (server/stage_memory.h). It must never crash, and what
// it accepts must hold what the run time relies on (rows covered, blocks in the pool,
// positions within capacity); a violation traps.
#pragma once

#include <cstddef>
#include <cstdint>

namespace placer::fuzz {

int FuzzStageWire(const std::uint8_t* data, std::size_t size);

}  // namespace placer::fuzz
