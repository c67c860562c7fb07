#include "tests/fuzz/stage_wire_fuzz_entry_point.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/stage_layout_parse.h"
#include "placement/reserves.h"
#include "runtime/stage_header.h"
#include "server/stage_memory.h"

namespace placer::fuzz {
namespace {

void Require(bool holds) {
  if (!holds) __builtin_trap();
}

}  // namespace

int FuzzStageWire(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  // Byte 0: which bytes follow; 1 and 2: the receiving stage's KV pool and window.
  const bool memory = data[0] & 1;
  const int64_t pool_blocks = data[1];
  const int64_t window = data[2] % 64;
  data += 3;
  size -= 3;
  if (memory) {
    auto uses = server::DecodeStageMemory(std::string(reinterpret_cast<const char*>(data), size));
    if (uses.ok()) {
      for (const server::StageMemoryUse& use : *uses) Require(!use.device.empty() && !use.kind.empty());
    }
    return 0;
  }
  int64_t ints[runtime::kStageHeaderInts] = {};
  const size_t header_bytes = std::min(size, sizeof(ints));
  std::memcpy(ints, data, header_bytes);
  auto header = runtime::ParseStageHeader(ints);
  if (header.ok()) {
    Require(header->layout_ints >= 0 && header->layout_ints <= runtime::kMaxLayoutInts);
    Require(header->rows >= 0 && header->width >= 0);
    Require(header->kv_blocks_in_use >= 0 && header->kv_blocks_in_use <= INT32_MAX);
    Require(header->width == 0 || header->rows <= runtime::kMaxHiddenElements / header->width);
  }
  // The rest: the layout, for the header's rows (or the raw ints when it was refused).
  std::vector<int64_t> layout((size - header_bytes) / sizeof(int64_t));
  if (!layout.empty()) std::memcpy(layout.data(), data + header_bytes, layout.size() * sizeof(int64_t));
  const int64_t rows = header.ok() ? header->rows : ints[3];
  auto parsed = model::ParseStageLayout(layout, rows, pool_blocks, window);
  if (!parsed.ok()) return 0;
  int64_t covered = 0;
  for (const model::StageSequenceLayout& sequence : *parsed) {
    Require(sequence.offset == covered && sequence.length >= 1);
    covered += sequence.length;
    Require(sequence.start >= 0);
    if (sequence.capacity < 0) continue;
    Require(!sequence.blocks.empty());
    for (int32_t block : sequence.blocks) Require(block >= 0 && block < pool_blocks);
    Require(sequence.start + sequence.length <= sequence.capacity);
    const int64_t held = static_cast<int64_t>(sequence.blocks.size()) * placement::kKvBlockPositions;
    Require(held >= sequence.capacity || (window > 0 && window <= held));
  }
  Require(covered == rows);
  return 0;
}

}  // namespace placer::fuzz
