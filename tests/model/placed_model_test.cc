// The plan is the one hand-off to the run time: LoadPlacedModel builds the model from the
// plan alone, and what runs is what the plan was sized for (served length, the paged KV pool
// exactly as reserved, compute dtype, virtual GPUs, the device of every block).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "placement/device_map.h"
#include "placement/plan_report.h"
#include "placement/plan_command.h"
#include "runtime/block_hook.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;

TEST(PlacedModel, RunsExactlyWhatThePlanWasSizedFor) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("placer-placed-", getpid());
  fs::remove_all(dir);
  ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir.string(),
                                     " --arch llama --preset tiny --dtype BF16 --seed 5 > /dev/null")
                            .c_str()),
            0);
  auto checkpoint = loader::Checkpoint::Open(dir.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();

  placement::PlanCommandArgs args;
  args.checkpoint_dir = dir.string();
  args.placement.devices = "cuda:0=2MiB,cuda:1=8MiB,cpu=1GiB";
  args.placement.max_seq_len = 80;
  args.placement.max_batch_size = 3;
  args.placement.max_batch_total_tokens = 160;
  args.placement.prefetch = false;
  auto plan = placement::BuildPlan(args);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The sizing the reserves were computed for travels with the plan.
  EXPECT_EQ(plan->sizing.limits.max_seq_len, 80);
  EXPECT_EQ(plan->sizing.limits.max_batch_size, 3);
  EXPECT_EQ(plan->sizing.kv_cache_blocks, 10) << "160 positions in blocks of 16";
  ASSERT_TRUE(plan->sizing.compute_dtype.has_value());
  EXPECT_EQ(*plan->sizing.compute_dtype, loader::DType::kBF16) << "the checkpoint's, no --dtype";
  EXPECT_TRUE(plan->sizing.virtual_gpus);
  EXPECT_FALSE(plan->sizing.prefetch);

  auto accounting = std::make_shared<runtime::RuntimeAccounting>(
      std::vector<std::string>{"cuda:0", "cuda:1", "cpu"});
  auto model = LoadPlacedModel(*checkpoint, *plan, accounting);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->max_positions(), 80);
  uint64_t kv_blocks = 0;
  for (const char* device : {"cuda:0", "cuda:1", "cpu"}) {
    const auto [used, free] = accounting->KvBlocks(device);
    EXPECT_EQ(used, 0u);
    if (free > 0) {
      EXPECT_EQ(free, 10u) << device << ": the pool is exactly the plan's KV reserve";
      kv_blocks = free;
    }
  }
  EXPECT_EQ(kv_blocks, 10u);
  // Every device's weights are what the plan put there, in the plan's dtype.
  for (const placement::DevicePlan& device : plan->devices) {
    EXPECT_EQ(accounting->Used(device.device.Name(), runtime::MemoryKind::kWeights),
              device.weights_bytes)
        << device.device.Name();
  }
  auto too_long = (*model)->NewSequence(81);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);

  // A plan of a bare module tree was sized in no compute dtype: it cannot be loaded.
  placement::Plan tree_plan = *plan;
  tree_plan.sizing.compute_dtype.reset();
  auto refused = LoadPlacedModel(*checkpoint, tree_plan);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("module tree"), std::string::npos) << refused.status();
  fs::remove_all(dir);
}

// Records where each block computed.
class ExecutionDevices final : public runtime::BlockHook {
 public:
  void Enter(runtime::BlockCall& call) override {
    seen.emplace_back(call.bound->spec.module, call.bound->execution_device.Name());
  }
  std::vector<std::pair<std::string, std::string>> seen;
};

// The device of `module` in a Hugging Face-form map (longest dotted prefix).
std::string MapLookup(const placement::DeviceMap& map, const std::string& module) {
  std::string found = "(uncovered)";
  std::size_t longest = 0;
  for (const auto& [key, device] : map) {
    if ((key.empty() || placement::IsDottedPrefix(key, module)) && key.size() + 1 > longest) {
      longest = key.size() + 1;
      found = device.Name();
    }
  }
  return found;
}

// The plan lists where every block computes, and each block runs exactly there: layers on
// cpu are staged onto the GPU, the embedding on cpu is looked up there, and with
// --offload-exec cpu every offloaded block runs on the cpu.
TEST(PlacedModel, EveryBlockComputesOnThePlansExecutionDevice) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("placer-placed-exec-", getpid());
  fs::remove_all(dir);
  ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir.string(),
                                     " --arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 "
                                     "--intermediate 96 --vocab 300 --seed 5 > /dev/null")
                            .c_str()),
            0);
  auto checkpoint = loader::Checkpoint::Open(dir.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const fs::path map_path = dir / "device_map.json";
  std::ofstream(map_path) << R"({"model.embed_tokens": "cpu", "model.layers.0": 0,
      "model.layers.1": 0, "model.layers.2": "cpu", "model.layers.3": "cpu", "model.norm": 0,
      "lm_head": 0})";
  const std::vector<std::pair<std::string, std::string>> staged_expected = {
      {"model.embed_tokens", "cpu"},   {"model.layers.0", "cuda:0"}, {"model.layers.1", "cuda:0"},
      {"model.layers.2", "cuda:0"},    {"model.layers.3", "cuda:0"}, {"model.norm", "cuda:0"},
      {"lm_head", "cuda:0"}};
  for (const std::string offload_exec : {"auto", "cpu"}) {
    placement::PlanCommandArgs args;
    args.checkpoint_dir = dir.string();
    args.placement.devices = "cuda:0=64MiB,cpu=1GiB";
    args.placement.device_map_path = map_path.string();
    args.placement.offload_exec = offload_exec;
    args.placement.max_seq_len = 32;
    args.placement.max_batch_size = 1;
    auto plan = placement::BuildPlan(args);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const bool staged = offload_exec == "auto";
    EXPECT_EQ(plan->offload_staged, staged) << placement::PlanToTable(*plan);
    std::vector<std::pair<std::string, std::string>> expected = staged_expected;
    if (!staged) expected[3].second = expected[4].second = "cpu";

    auto hook = std::make_shared<ExecutionDevices>();
    auto model = LoadPlacedModel(*checkpoint, *plan, nullptr, {hook});
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->Forward({1, 2, 3}, false).ok());
    EXPECT_EQ(hook->seen, expected) << offload_exec;
    for (const auto& [module, device] : expected) {
      EXPECT_EQ(MapLookup(plan->execution_map, module), device) << offload_exec << " " << module;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace placer::model
