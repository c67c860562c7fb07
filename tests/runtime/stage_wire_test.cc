// The torch-free parsers of what one pipeline stage takes from another: message headers
// refused field by field, layout ints near the int64 limits refused without overflow, a
// worker's memory figures round trip and refused naming the entry; and the stage_wire fuzz
// target's saved inputs still pass.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "model/stage_layout_parse.h"
#include "runtime/stage_header.h"
#include "server/stage_memory.h"
#include "tests/fuzz/stage_wire_fuzz_entry_point.h"

namespace placer {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(StageHeaderTest, AcceptsWhatTheLinkSends) {
  const int64_t step[] = {1, 7, 12, 20, 128, runtime::kWireBF16, 3};
  auto header = runtime::ParseStageHeader(step);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->kind, runtime::StageMessageKind::kStep);
  EXPECT_EQ(header->rows, 20);
  EXPECT_EQ(header->dtype, runtime::kWireBF16);
  EXPECT_EQ(header->kv_blocks_in_use, 3);
  const int64_t rollback[] = {4, 7, 0, 0, 0, 0, 0};
  ASSERT_TRUE(runtime::ParseStageHeader(rollback).ok());
  const int64_t heartbeat[] = {2, 0, 0, 0, 0, 0, 5};
  auto beat = runtime::ParseStageHeader(heartbeat);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->kv_blocks_in_use, 5) << "heartbeats carry the leader's KV blocks in use too";
}

TEST(StageHeaderTest, RefusesEachBadField) {
  const std::vector<std::vector<int64_t>> bad = {
      {0, 1, 0, 0, 0, 0, 0},                   // no such kind
      {5, 1, 0, 0, 0, 0, 0},                   // no such kind
      {1, 1, -1, 0, 0, 0, 0},                  // negative layout
      {1, 1, runtime::kMaxLayoutInts + 1, 0, 0, 0, 0},
      {1, 1, 0, -1, 4, 6, 0},                  // negative rows
      {1, 1, 0, 4, -1, 6, 0},                  // negative width
      {1, 1, 0, kMax, kMax, 6, 0},             // rows x width overflows
      {1, 1, 0, int64_t{1} << 20, int64_t{1} << 13, 6, 0},  // more than 2^32 values
      {1, 1, 0, 4, 4, 7, 0},                   // a dtype the wire does not carry
      {2, 1, 3, 0, 0, 0, 0},                   // a heartbeat with a layout
      {2, 1, 0, 0, 0, 0, -1},                  // negative KV blocks in use
      {1, 1, 0, 4, 4, 6, int64_t{1} << 31},    // more KV blocks than a pool numbers
  };
  for (const std::vector<int64_t>& ints : bad) {
    auto header = runtime::ParseStageHeader(ints.data());
    ASSERT_FALSE(header.ok()) << ints[0] << " " << ints[2] << " " << ints[3] << " " << ints[4];
    EXPECT_NE(header.status().message().find("malformed header (kind "), std::string::npos);
  }
}

TEST(StageLayoutParseTest, RefusesIntsNearTheLimitsWithoutOverflow) {
  // One sequence: offset 0, length, start, capacity, blocks, block ids.
  auto parse = [](std::vector<int64_t> layout, int64_t rows = 4) {
    return model::ParseStageLayout(layout, rows, /*pool_blocks=*/8, /*window=*/0);
  };
  ASSERT_TRUE(parse({1, 0, 4, 0, 16, 1, 3}).ok());
  EXPECT_FALSE(parse({1, 0, kMax, 0, -1, 0}).ok());      // length past the rows
  EXPECT_FALSE(parse({1, 0, 4, kMax - 1, 16, 1, 3}).ok());  // start + length past capacity
  EXPECT_FALSE(parse({1, 0, 4, kMax, kMax, 1, 3}).ok());
  EXPECT_FALSE(parse({1, 0, 4, 0, 16, kMax, 3}).ok());      // more blocks than sent
  EXPECT_FALSE(parse({1, 0, 4, 0, 16, 1, 8}).ok());         // a block outside the pool
  auto too_long = parse({1, 0, 4, 0, 32, 1, 3});            // 16 held, 32 claimed, no ring
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("sequence 0: capacity 32 for 16 held positions"),
            std::string::npos) << too_long.status();
  // A ring holds a window: 16 positions serve a capacity of 64 with a window of 8.
  EXPECT_TRUE(model::ParseStageLayout({1, 0, 4, 40, 64, 1, 3}, 4, 8, 8).ok());
  EXPECT_FALSE(model::ParseStageLayout({1, 0, 4, 40, 64, 1, 3}, 4, 0, 8).ok()) << "no pool";
}

TEST(StageMemoryTest, RoundTripsAndRefusesNamingTheEntry) {
  runtime::RuntimeFigures figures;
  runtime::DeviceUsage gpu;
  gpu.device = "cuda:0";
  gpu.used_bytes = {1000, 200, 30};
  figures.devices.push_back(gpu);
  auto uses = server::DecodeStageMemory(server::EncodeStageMemory(figures));
  ASSERT_TRUE(uses.ok()) << uses.status();
  ASSERT_EQ(uses->size(), 3u);
  EXPECT_EQ((*uses)[0].device, "cuda:0");
  EXPECT_EQ((*uses)[0].kind, "weights");
  EXPECT_EQ((*uses)[0].bytes, 1000u);
  EXPECT_EQ((*uses)[1].kind, "kv_cache");
  EXPECT_EQ((*uses)[2].bytes, 30u);

  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"{}", "not a JSON array"},
           {"[1]", "entry 0: device"},
           {R"([{"device": "cpu"}])", "entry 0 (cpu): used_bytes must be an object"},
           {R"([{"device": "cpu", "used_bytes": {"weights": -1, "kv_cache": 0, "staging": 0}}])",
            "entry 0 (cpu): used_bytes.weights must be a non-negative integer"},
       }) {
    auto refused = server::DecodeStageMemory(text);
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_NE(refused.status().message().find(why), std::string::npos) << refused.status();
  }
}

TEST(StageWireFuzzEntryPoint, SavedInputsStillPass) {
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PLACER_STAGE_WIRE_REGRESSIONS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    fuzz::FuzzStageWire(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    ++replayed;
  }
  EXPECT_GT(replayed, 0);
}

}  // namespace
}  // namespace placer
