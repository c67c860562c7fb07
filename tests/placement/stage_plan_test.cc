// Planning a pipeline group: the cut of the decoder layers over nodes (contiguous, at least
// one each, in proportion to capacity, the leader keeping what is not a layer), each share
// planned by the ordinary planner over its node, and the subtree a share plans.
#include "placement/stage_plan.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/checkpoint_writer.h"
#include "placement/module_subtree.h"

namespace placer::placement {
namespace {

using ::testing::HasSubstr;

// A Llama of `layers` layers whose embedding and lm_head (untied) are as large as 2 layers.
std::string WriteLlama(const std::string& name, int layers, bool tied = false) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  loader::CheckpointSpec spec;
  spec.arch = "llama";
  spec.layers = layers;
  spec.hidden = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.intermediate = 128;
  spec.vocab = 256;
  spec.max_positions = 128;
  spec.tie_word_embeddings = tied;
  auto written = loader::WriteCheckpoint(
      dir, spec, 1 << 30, [](const loader::ExpectedTensor&, loader::DType) {
        return [](std::uint8_t* destination, std::size_t nbytes) {
          std::memset(destination, 0, nbytes);
          return absl::OkStatus();
        };
      });
  EXPECT_TRUE(written.ok()) << written.status();
  return dir;
}

std::vector<std::pair<int64_t, int64_t>> Layers(const std::vector<StageShare>& shares) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const StageShare& share : shares) out.emplace_back(share.first_layer, share.end_layer);
  return out;
}

TEST(SplitStagesTest, ContiguousRunsInProportionToCapacityWithTheRestOnTheLeader) {
  const std::string dir = WriteLlama("split8", 8);
  auto equal = SplitStages(dir, {100, 100});
  ASSERT_TRUE(equal.ok()) << equal.status();
  // Layers of 147,968 bytes (F32: q, o 64x64, k, v 32x64, three 128x64, two norms);
  // embedding and lm_head 65,536 each, final norm 256. The leader's half of 1,315,072 bytes
  // holds those 131,328 and layers until it passes 657,536: 4 layers.
  EXPECT_EQ(Layers(*equal), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 8}}));
  const StageShare& leader = (*equal)[0];
  EXPECT_THAT(leader.blocks, ::testing::ElementsAre("model.embed_tokens", "model.layers.0",
                                                    "model.layers.1", "model.layers.2",
                                                    "model.layers.3", "model.norm", "lm_head"));
  EXPECT_THAT((*equal)[1].other_blocks, ::testing::Contains("lm_head"));
  EXPECT_EQ((*equal)[1].blocks.size(), 4u);
  EXPECT_EQ(leader.first_layer_block, 1u);

  // A node with 3 times the room takes the larger share: the leader's quarter (328,768)
  // is passed after 2 layers.
  auto skewed = SplitStages(dir, {100, 300});
  ASSERT_TRUE(skewed.ok());
  EXPECT_EQ(Layers(*skewed), (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 8}}));

  // Every node gets at least one layer, even one with almost no room.
  auto three = SplitStages(dir, {1000, 1, 1});
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(Layers(*three), (std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 7}, {7, 8}}));
}

TEST(SplitStagesTest, MoreStagesThanLayersIsRefusedNamingBoth) {
  const std::string dir = WriteLlama("split2", 2);
  auto refused = SplitStages(dir, {1, 1, 1});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("3 stages but the model has only 2 decoder layers"));
}

TEST(PlanStageTest, EachShareIsPlannedOverItsNodeAndNamesItsNode) {
  const std::string dir = WriteLlama("stage_plan", 8);
  auto shares = SplitStages(dir, {1, 1});
  ASSERT_TRUE(shares.ok());
  PlanCommandArgs args;
  args.checkpoint_dir = dir;
  args.placement.devices = "cuda:0=8MiB,cpu=1GiB";
  args.placement.max_seq_len = 64;
  args.placement.max_batch_size = 2;
  auto worker = PlanStage(args, (*shares)[1]);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->other_stage_blocks, (*shares)[1].other_blocks);
  // Only its layers' weights and KV cache: 4 layers of 147,968 bytes; K and V x 2 KV heads x
  // head_dim 16 x 4 bytes x 64 positions x 2 sequences each.
  EXPECT_EQ(worker->devices[0].weights_bytes, 4u * 147968u);
  EXPECT_EQ(worker->devices[0].kv_reserve_bytes, 4u * 2 * 2 * 16 * 4 * 64 * 2);
  const auto map = StageDeviceMap(*worker, (*shares)[1]);
  ASSERT_EQ(map.size(), 4u);
  EXPECT_EQ(map[0].first, "model.layers.4");
  EXPECT_EQ(NodeDeviceName(1, map[0].second), "node1:cuda:0");

  // A node too small for its share is refused naming the node and its layers.
  args.placement.devices = "cuda:0=64KiB,cpu=64KiB";
  auto refused = PlanStage(args, (*shares)[1]);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("node 1 (decoder layers 4..7)"));
}

TEST(GroupPlanCommandTest, PlansEveryNodeAndRefusesABadNodesFile) {
  const std::string dir = WriteLlama("group_plan", 4, /*tied=*/true);
  const std::string nodes = ::testing::TempDir() + "/nodes.json";
  std::ofstream(nodes) << R"(["cuda:0=8MiB,cpu=1GiB", "cuda:0=8MiB,cuda:1=8MiB,cpu=1GiB"])";
  PlanCommandArgs args;
  args.checkpoint_dir = dir;
  args.placement.max_seq_len = 64;
  args.format = "json";
  std::ostringstream out;
  ASSERT_TRUE(RunGroupPlanCommand(args, nodes, out).ok());
  const nlohmann::json json = nlohmann::json::parse(out.str());
  ASSERT_EQ(json["stages"].size(), 2u);
  EXPECT_EQ(json["device_map"]["model.embed_tokens"], "node0:cuda:0");
  EXPECT_EQ(json["device_map"]["lm_head"], "node0:cuda:0");  // tied: with the embedding
  EXPECT_EQ(json["device_map"]["model.layers.3"], "node1:cuda:0");

  std::ofstream(nodes) << R"(["cuda:0=8MiB", 7])";
  std::ostringstream refused_out;
  const absl::Status refused = RunGroupPlanCommand(args, nodes, refused_out);
  EXPECT_THAT(refused.message(), HasSubstr("[1] is not a --devices string"));
  std::ofstream(nodes) << "not json";
  EXPECT_THAT(RunGroupPlanCommand(args, nodes, refused_out).message(), HasSubstr("JSON array"));
}

TEST(SubtreeSpecTest, KeepsTheShareAndRefusesATiedGroupAcrossStages) {
  ModuleTreeSpec spec;
  spec.tensors = {{"model.embed_tokens.weight", {4}, loader::DType::kU8, false, true},
                  {"model.layers.0.w", {4}, loader::DType::kU8, false, false},
                  {"model.layers.1.w", {4}, loader::DType::kU8, false, false},
                  {"lm_head.weight", {4}, loader::DType::kU8, false, false}};
  spec.module_classes = {{"model.layers.0", "Block"}, {"model.layers.1", "Block"}};
  spec.no_split_classes = {"Block"};
  spec.kv_cache_bytes = {{"model.layers.0", 10}, {"model.layers.1", 10}};
  spec.tied = {{"model.embed_tokens.weight", "lm_head.weight"}};
  auto worker = SubtreeSpec(spec, {"model.layers.1"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_EQ(worker->tensors.size(), 1u);
  EXPECT_EQ(worker->tensors[0].name, "model.layers.1.w");
  EXPECT_EQ(worker->kv_cache_bytes.size(), 1u);
  EXPECT_TRUE(worker->tied.empty());
  auto leader = SubtreeSpec(spec, {"model.embed_tokens", "model.layers.0", "lm_head"});
  ASSERT_TRUE(leader.ok());
  EXPECT_EQ(leader->tied.size(), 1u);
  auto split = SubtreeSpec(spec, {"model.embed_tokens", "model.layers.0"});
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("would be split between stages"));
  EXPECT_FALSE(SubtreeSpec(spec, {"model.nothing"}).ok());
}

}  // namespace
}  // namespace placer::placement
