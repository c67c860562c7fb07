#include "placement/plan_command.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/checkpoint_writer.h"

namespace placer::placement {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// 4 layers of 40 bytes (u8), embed 20, norm 1, lm_head 20: 182 bytes.
std::string TreeJson() {
  nlohmann::json tree;
  tree["tensors"] = nlohmann::json::array();
  tree["tensors"].push_back({{"name", "model.embed_tokens.weight"}, {"shape", {20}}, {"dtype", "U8"}});
  for (int i = 0; i < 4; ++i) {
    const std::string layer = "model.layers." + std::to_string(i);
    tree["tensors"].push_back({{"name", layer + ".mlp.weight"}, {"shape", {30}}, {"dtype", "U8"}});
    tree["tensors"].push_back(
        {{"name", layer + ".norm.running_mean"}, {"shape", {10}}, {"dtype", "U8"}, {"buffer", true}});
    tree["module_classes"][layer] = "Block";
  }
  tree["tensors"].push_back({{"name", "model.norm.weight"}, {"shape", {1}}, {"dtype", "U8"}});
  tree["tensors"].push_back({{"name", "lm_head.weight"}, {"shape", {20}}, {"dtype", "U8"}});
  tree["no_split"] = {"Block"};
  return tree.dump();
}

TEST(PlanCommandTest, PlansAHypotheticalModelOnVirtualGpusAsJson) {
  PlanCommandArgs args;
  args.module_tree_path = WriteFile("tree.json", TreeJson());
  args.placement.devices = "cuda:0=100B,cuda:1=120B,cpu=10GiB";
  args.placement.max_memory = "0=100B,1=120B,cpu=1GiB";
  args.format = "json";
  std::ostringstream out;
  ASSERT_TRUE(RunPlanCommand(args, out).ok());
  const nlohmann::json json = nlohmann::json::parse(out.str());
  EXPECT_EQ(json["device_map"]["model.embed_tokens"], 0);
  EXPECT_EQ(json["device_map"]["model.layers.1"], 0);
  EXPECT_EQ(json["device_map"]["model.layers.2"], 1);
  EXPECT_EQ(json["device_map"]["lm_head"], 1);
  EXPECT_EQ(json["devices"][0]["name"], "cuda:0");
  EXPECT_EQ(json["devices"][0]["weights_bytes"], 100);
  EXPECT_EQ(json["devices"][0]["budget_bytes"], 100);
  EXPECT_EQ(json["devices"][0]["reserved_bytes"], 0);
  EXPECT_TRUE(json["reasons"].is_object());
}

TEST(PlanCommandTest, PlansARealCheckpointWithKvReserveAndPrintsATable) {
  const std::string dir = ::testing::TempDir() + "/plan_checkpoint";
  loader::CheckpointSpec spec;
  spec.arch = "llama";
  spec.layers = 4;
  spec.hidden = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.intermediate = 128;
  spec.vocab = 256;
  spec.max_positions = 128;
  auto written = loader::WriteCheckpoint(
      dir, spec, 100000, [](const loader::ExpectedTensor&, loader::DType) {
        return [](std::uint8_t* destination, std::size_t nbytes) {
          std::memset(destination, 0, nbytes);
          return absl::OkStatus();
        };
      });
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_GT(written->shard_count, 1);

  PlanCommandArgs args;
  args.checkpoint_dir = dir;
  args.placement.devices = "cuda:0=1MiB,cuda:1=1MiB,cpu=1GiB";
  args.placement.max_memory = "0=1MiB,1=1MiB,cpu=1GiB";
  args.placement.max_seq_len = 64;
  args.placement.max_batch_size = 2;
  args.format = "json";
  std::ostringstream json_out;
  ASSERT_TRUE(RunPlanCommand(args, json_out).ok());
  const nlohmann::json json = nlohmann::json::parse(json_out.str());
  // KV per layer = 2 x kv_heads 2 x head_dim 16 x 4 bytes (F32) x 64 x 2.
  const std::uint64_t kv_per_layer = 2 * 2 * 16 * 4 * 64 * 2;
  int layers_on_gpu1 = 0;
  for (int i = 0; i < 4; ++i) {
    if (json["device_map"].value("model.layers." + std::to_string(i), -1) == 1) ++layers_on_gpu1;
  }
  EXPECT_GT(layers_on_gpu1, 0);
  EXPECT_EQ(json["devices"][1]["kv_reserve_bytes"], layers_on_gpu1 * kv_per_layer);
  EXPECT_GT(json["devices"][0]["activation_reserve_bytes"], 0);

  // Sequences sharing 80 positions of KV cache (5 blocks) instead of 2 x 64.
  args.placement.max_batch_total_tokens = 80;
  std::ostringstream shared_out;
  ASSERT_TRUE(RunPlanCommand(args, shared_out).ok());
  const nlohmann::json shared = nlohmann::json::parse(shared_out.str());
  int shared_on_gpu1 = 0;
  for (int i = 0; i < 4; ++i) {
    if (shared["device_map"].value("model.layers." + std::to_string(i), -1) == 1) ++shared_on_gpu1;
  }
  EXPECT_EQ(shared["devices"][1]["kv_reserve_bytes"], shared_on_gpu1 * (2 * 2 * 16 * 4 * 80));
  args.placement.max_batch_total_tokens = 63;
  EXPECT_THAT(RunPlanCommand(args, shared_out).message(),
              HasSubstr("--max-batch-total-tokens 63: must be 0 or at least the 64 positions"));
  args.placement.max_batch_total_tokens = 0;

  args.format = "table";
  std::ostringstream table;
  ASSERT_TRUE(RunPlanCommand(args, table).ok());
  EXPECT_THAT(table.str(), HasSubstr("KV reserve"));
  EXPECT_THAT(table.str(), HasSubstr("cuda:1"));

  // Offloaded blocks: the JSON says how they run; F16 never runs them on the cpu.
  args.format = "json";
  args.placement.max_memory = "0=800KiB,1=800KiB,cpu=1GiB";
  args.placement.offload_exec = "cpu";
  std::ostringstream cpu_out;
  ASSERT_TRUE(RunPlanCommand(args, cpu_out).ok());
  const nlohmann::json on_cpu = nlohmann::json::parse(cpu_out.str());
  EXPECT_EQ(on_cpu["offload_execution"]["mode"], "cpu");
  EXPECT_EQ(on_cpu["offload_execution"]["device"], "cpu");
  EXPECT_FALSE(on_cpu["offload_execution"]["blocks"].empty());
  args.placement.dtype = "F16";
  EXPECT_THAT(RunPlanCommand(args, cpu_out).message(),
              HasSubstr("--offload-exec cpu: compute dtype F16 cannot run on the cpu"));
  args.placement.offload_exec = "auto";
  std::ostringstream f16_out;
  absl::Status f16 = RunPlanCommand(args, f16_out);
  ASSERT_TRUE(f16.ok()) << f16;
  EXPECT_NE(nlohmann::json::parse(f16_out.str())["offload_execution"]["mode"], "cpu");
}

TEST(PlanCommandTest, ErrorsSayWhy) {
  std::ostringstream out;
  PlanCommandArgs none;
  EXPECT_THAT(RunPlanCommand(none, out).message(), HasSubstr("either a checkpoint"));
  PlanCommandArgs args;
  args.module_tree_path = WriteFile("tree2.json", TreeJson());
  args.placement.devices = "cuda:0=100B";
  args.format = "yaml";
  EXPECT_THAT(RunPlanCommand(args, out).message(), HasSubstr("--format 'yaml'"));
  args.format = "table";
  args.placement.max_seq_len = 128;
  EXPECT_THAT(RunPlanCommand(args, out).message(), HasSubstr("--max-seq-len needs"));
  args.placement.max_seq_len = 0;
  args.placement.max_memory = "0=10B,cpu=10B";
  EXPECT_THAT(RunPlanCommand(args, out).message(), HasSubstr("does not fit"));
  args.placement.max_memory = "0=100B,cpu=1GiB";
  args.placement.device_map_path = WriteFile("map.json", R"({"model": 0, "lm_head": "tpu"})");
  EXPECT_THAT(RunPlanCommand(args, out).message(), HasSubstr("module 'lm_head': unknown device"));
}

}  // namespace
}  // namespace placer::placement
