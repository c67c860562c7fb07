#include "placement/planner.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "placement/device_map.h"
#include "tests/placement/test_trees.h"

namespace placer::placement {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::BuildTree;
using testing::Budgets;
using testing::Bytes;
using testing::DecoderSpec;

std::map<std::string, std::string> MapOf(const Plan& plan) {
  std::map<std::string, std::string> out;
  for (const auto& [name, device] : plan.device_map) out[name] = device.Name();
  return out;
}

std::map<std::string, std::string> ReasonsOf(const Plan& plan) {
  return {plan.reasons.begin(), plan.reasons.end()};
}

Plan MustPlan(const ModuleTree& tree, const std::vector<DeviceBudget>& budgets,
              PlanOptions options = {}) {
  absl::StatusOr<Plan> plan = PlanPlacement(tree, budgets, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan{};
}

TEST(PlannerTest, SequentialFillsGpusInOrder) {
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 10, 10));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 30}, {"cuda:1", 40}, {"cpu", 100}}));
  const std::map<std::string, std::string> expected = {
      {"model.embed_tokens", "cuda:0"}, {"model.layers.0", "cuda:0"},
      {"model.layers.1", "cuda:0"},     {"model.layers.2", "cuda:1"},
      {"model.layers.3", "cuda:1"},     {"model.norm", "cuda:1"},
      {"lm_head", "cuda:1"}};
  EXPECT_EQ(MapOf(plan), expected);
  // Execution order is kept in the map.
  EXPECT_EQ(plan.device_map.front().first, "model.embed_tokens");
  EXPECT_EQ(plan.device_map.back().first, "lm_head");
  EXPECT_TRUE(plan.reasons.empty());
  EXPECT_EQ(plan.devices[0].weights_bytes, 30u);
  EXPECT_EQ(plan.devices[1].weights_bytes, 31u);
  EXPECT_EQ(plan.devices[2].weights_bytes, 0u);
  EXPECT_EQ(plan.execution_device, Device::Cuda(0));
}

TEST(PlannerTest, WholeModelOnOneDeviceIsTheEmptyKey) {
  const ModuleTree tree = BuildTree(DecoderSpec(2, 10, 10, 10));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 1000}, {"cpu", 1000}}));
  EXPECT_EQ(MapOf(plan), (std::map<std::string, std::string>{{"", "cuda:0"}}));
  EXPECT_TRUE(plan.reasons.empty());
}

TEST(PlannerTest, BalancedSpreadsLayersOverGpus) {
  const ModuleTree tree = BuildTree(DecoderSpec(8, 10, 2, 2));  // 85 bytes
  const auto budgets = Budgets({{"cuda:0", 100}, {"cuda:1", 100}, {"cpu", 1000}});
  const Plan sequential = MustPlan(tree, budgets);
  EXPECT_EQ(sequential.devices[0].weights_bytes, 85u);
  EXPECT_EQ(sequential.devices[1].weights_bytes, 0u);

  PlanOptions options;
  options.strategy = Strategy::kBalanced;
  const Plan balanced = MustPlan(tree, budgets, options);
  // Share = 85 / 2 + largest block 10 = 52: embed and five layers.
  EXPECT_EQ(balanced.devices[0].weights_bytes, 52u);
  EXPECT_EQ(balanced.devices[1].weights_bytes, 33u);
  EXPECT_EQ(MapOf(balanced).at("model.layers.4"), "cuda:0");
  EXPECT_EQ(MapOf(balanced).at("model.layers.5"), "cuda:1");
  EXPECT_EQ(balanced.devices[2].weights_bytes, 0u);
}

TEST(PlannerTest, BalancedLow0LeavesGpu0OnlyWhatOthersCannotTake) {
  const ModuleTree tree = BuildTree(DecoderSpec(8, 10, 2, 2));  // 85 bytes
  PlanOptions options;
  options.strategy = Strategy::kBalancedLow0;
  const Plan roomy =
      MustPlan(tree, Budgets({{"cuda:0", 100}, {"cuda:1", 100}, {"cuda:2", 100}}), options);
  EXPECT_EQ(roomy.devices[0].weights_bytes, 0u);
  EXPECT_GT(roomy.devices[1].weights_bytes, 0u);
  EXPECT_GT(roomy.devices[2].weights_bytes, 0u);

  const Plan tight =
      MustPlan(tree, Budgets({{"cuda:0", 40}, {"cuda:1", 40}, {"cuda:2", 40}}), options);
  EXPECT_EQ(tight.devices[0].weights_bytes, 5u);  // 85 - 40 - 40
  EXPECT_EQ(tight.devices[1].weights_bytes, 40u);
  EXPECT_EQ(tight.devices[2].weights_bytes, 40u);
}

TEST(PlannerTest, NoSplitBlockStaysWholeEvenWhenPartOfItWouldFit) {
  const ModuleTree tree = BuildTree(DecoderSpec(5, 10, 1, 1));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 48}, {"cpu", 100}}));
  // cuda:0 keeps 20 bytes to stage two offloaded layers; after three layers
  // 7 bytes are left, enough for layer 2's 2-byte attn but not the layer.
  EXPECT_EQ(MapOf(plan).at("model.layers.1"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("model.layers.2"), "cpu");
  EXPECT_EQ(MapOf(plan).count("model.layers.2.attn"), 0u);
  EXPECT_EQ(MapOf(plan).at("model.norm"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("lm_head"), "cuda:0");
  EXPECT_EQ(plan.devices[0].staging_reserve_bytes, 20u);
}

TEST(PlannerTest, SplitModulePlacesItsOwnDirectTensorsToo) {
  ModuleTreeSpec spec;
  spec.tensors.push_back(Bytes("block.scale", 4));
  spec.tensors[0].is_buffer = true;
  for (int i = 0; i < 10; ++i) spec.tensors.push_back(Bytes("block.a.w" + std::to_string(i), 5));
  spec.tensors.push_back(Bytes("block.b.weight", 10));
  const ModuleTree tree = BuildTree(spec);
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 60}, {"cpu", 100}}));
  // Staging keeps two slots of the largest offloaded part (block.b, 10 bytes): 40 bytes are
  // left for weights, the buffer and seven of the a.w tensors.
  EXPECT_EQ(MapOf(plan).at("block.scale"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("block.a.w6"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("block.a.w7"), "cpu");
  EXPECT_EQ(MapOf(plan).at("block.b"), "cpu");
  EXPECT_EQ(plan.devices[0].weights_bytes, 39u);
  EXPECT_EQ(plan.devices[0].staging_reserve_bytes, 20u);
}

TEST(PlannerTest, BigBlockThatDoesNotFitDoesNotLeaveTheGpuEmpty) {
  // accelerate #3041: the embedding does not fit cuda:0, so Accelerate moves on to cuda:1 for
  // good and spills the last layer to cpu. Here the embedding goes ahead to cuda:1 while
  // cuda:0, still empty, stays the GPU being filled; when it is full the walk moves on to
  // cuda:1 for the rest: three runs, nothing on cpu.
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 30, 1));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 25}, {"cuda:1", 60}, {"cpu", 100}}));
  EXPECT_EQ(MapOf(plan).at("model.embed_tokens"), "cuda:1");
  EXPECT_EQ(MapOf(plan).at("model.layers.0"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("model.layers.1"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("model.layers.2"), "cuda:1");
  EXPECT_EQ(MapOf(plan).at("model.layers.3"), "cuda:1");
  EXPECT_EQ(MapOf(plan).at("model.norm"), "cuda:1");
  EXPECT_EQ(MapOf(plan).at("lm_head"), "cuda:1");
  EXPECT_EQ(plan.devices[2].weights_bytes, 0u);
}

// The case: embedding 250 MB, layers 86 MB, on cuda:0=200MiB,cuda:1=24GiB. The whole
// model fits cuda:1, but sequential fills cuda:0 first: the embedding goes ahead to cuda:1 and
// cuda:0 takes the first two layers.
TEST(PlannerTest, AGpuTooSmallForTheFirstBlockStillTakesWhatFollows) {
  const std::uint64_t mb = 1000 * 1000;
  const ModuleTree tree =
      BuildTree(DecoderSpec(32, 86 * mb, 250 * mb, 250 * mb));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 200ull << 20}, {"cuda:1", 24ull << 30}}));
  EXPECT_EQ(MapOf(plan).at("model.embed_tokens"), "cuda:1");
  EXPECT_EQ(MapOf(plan).at("model.layers.0"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("model.layers.1"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("model.layers.2"), "cuda:1");
  EXPECT_EQ(MapOf(plan).at("lm_head"), "cuda:1");
  EXPECT_EQ(plan.devices[0].weights_bytes, 2 * 86 * mb);
}

// Fill-what-fits would put layer 2 (too big for what cuda:0 has left) on cuda:1 and the small
// layer 3 back on cuda:0: a hop each way on every token. Runs stay contiguous instead.
TEST(PlannerTest, BlocksOfMixedSizesKeepOneRunPerGpu) {
  ModuleTreeSpec spec;
  const std::vector<int> sizes = {10, 10, 30, 5, 5, 30, 5};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    spec.tensors.push_back(Bytes(absl::StrCat("layers.", i, ".w"), sizes[i]));
    spec.module_classes[absl::StrCat("layers.", i)] = "Layer";
  }
  spec.no_split_classes = {"Layer"};
  const ModuleTree tree = BuildTree(spec);
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 30}, {"cuda:1", 100}}));
  std::vector<std::string> devices;
  for (int i = 0; i < 7; ++i) devices.push_back(MapOf(plan).at(absl::StrCat("layers.", i)));
  EXPECT_EQ(devices, (std::vector<std::string>{"cuda:0", "cuda:0", "cuda:1", "cuda:1", "cuda:1",
                                               "cuda:1", "cuda:1"}));
}

TEST(PlannerTest, TiedTensorsAreCountedOnceAndPlacedTogether) {
  const ModuleTree tree = BuildTree(DecoderSpec(2, 10, 10, 0, /*tied=*/true));
  EXPECT_EQ(tree.total_bytes(), 31u);  // embed once, two layers, norm
  const int lm_head = *tree.FindTensor("lm_head.weight");
  const int embed = *tree.FindTensor("model.embed_tokens.weight");

  const Plan roomy = MustPlan(tree, Budgets({{"cuda:0", 45}, {"cpu", 100}}));
  EXPECT_EQ(roomy.tensor_devices[embed], Device::Cuda(0));
  EXPECT_EQ(roomy.tensor_devices[lm_head], Device::Cuda(0));
  EXPECT_EQ(roomy.devices[0].weights_bytes, 31u);

  // The embedding does not fit cuda:0; lm_head follows it to cuda:1.
  const Plan moved = MustPlan(tree, Budgets({{"cuda:0", 5}, {"cuda:1", 100}}));
  EXPECT_EQ(moved.tensor_devices[embed], Device::Cuda(1));
  EXPECT_EQ(moved.tensor_devices[lm_head], Device::Cuda(1));
}

TEST(PlannerTest, ReservesKvCacheActivationsAndStaging) {
  ModuleTreeSpec spec = DecoderSpec(10, 10, 2, 2);
  for (int i = 0; i < 10; ++i) spec.kv_cache_bytes["model.layers." + std::to_string(i)] = 1;
  const ModuleTree tree = BuildTree(spec);
  PlanOptions options;
  options.activation_reserve_bytes = 5;
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 100}, {"cpu", 1000}}), options);
  const DevicePlan& gpu = plan.devices[0];
  // Six layers stay (6 x 11 with their KV cache); four are offloaded, whose
  // KV cache and the two largest of them (staging) are kept on cuda:0.
  EXPECT_EQ(MapOf(plan).at("model.layers.5"), "cuda:0");
  EXPECT_EQ(MapOf(plan).at("model.layers.6"), "cpu");
  EXPECT_EQ(gpu.weights_bytes, 65u);
  EXPECT_EQ(gpu.kv_reserve_bytes, 10u);
  EXPECT_EQ(gpu.activation_reserve_bytes, 5u);
  EXPECT_EQ(gpu.staging_reserve_bytes, 20u);
  EXPECT_EQ(gpu.left_bytes(), 0);
  EXPECT_EQ(plan.devices[1].kv_reserve_bytes, 0u);
  EXPECT_EQ(plan.devices[1].activation_reserve_bytes, 0u);
}

TEST(PlannerTest, WithoutGpusCpuRunsBlocksAndDiskIsStagedThroughIt) {
  ModuleTreeSpec spec = DecoderSpec(4, 10, 2, 2);
  for (int i = 0; i < 4; ++i) spec.kv_cache_bytes["model.layers." + std::to_string(i)] = 2;
  const ModuleTree tree = BuildTree(spec);
  const Plan plan = MustPlan(tree, Budgets({{"cpu", 40}, {"disk", 1000}}));
  EXPECT_EQ(plan.execution_device, Device::Cpu());
  EXPECT_EQ(MapOf(plan).at("model.layers.0"), "cpu");
  EXPECT_EQ(MapOf(plan).at("model.layers.3"), "disk");
  EXPECT_THAT(ReasonsOf(plan).at("model.layers.3"), HasSubstr("cpu full:"));
  const DevicePlan& cpu = plan.devices[0];
  EXPECT_LE(cpu.weights_bytes + cpu.reserved_bytes(), 40u);
  EXPECT_GE(cpu.staging_reserve_bytes, 10u);
}

TEST(PlannerTest, OffloadOrderIsGpusThenCpuThenDisk) {
  const ModuleTree tree = BuildTree(DecoderSpec(6, 10, 1, 1));
  const Plan plan =
      MustPlan(tree, Budgets({{"cuda:0", 35}, {"cpu", 25}, {"disk", 1000}}));
  std::vector<std::string> layer_devices;
  for (int i = 0; i < 6; ++i) {
    layer_devices.push_back(MapOf(plan).at("model.layers." + std::to_string(i)));
  }
  // cuda:0 keeps room for staging two 10-byte blocks: 35 - 20 leaves one layer.
  EXPECT_EQ(layer_devices, (std::vector<std::string>{"cuda:0", "cpu", "cpu", "disk", "disk",
                                                     "disk"}));
  EXPECT_EQ(plan.devices[0].staging_reserve_bytes, 20u);
  EXPECT_EQ(ReasonsOf(plan).at("model.layers.1"), "cuda:0 full: 4 B left, block needs 10 B");
  EXPECT_EQ(ReasonsOf(plan).at("model.layers.3"),
            "cuda:0 full: 4 B left, block needs 10 B; cpu full: 5 B left, block needs 10 B");
}

TEST(PlannerTest, DoesNotFitSaysByHowManyBytes) {
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 10, 10));  // 61 bytes
  absl::StatusOr<Plan> plan = PlanPlacement(tree, Budgets({{"cpu", 10}, {"disk", 10}}), {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(), HasSubstr("does not fit even with disk"));
  EXPECT_THAT(plan.status().message(), HasSubstr("short by 41 bytes"));

  absl::StatusOr<Plan> no_disk = PlanPlacement(tree, Budgets({{"cpu", 10}}), {});
  EXPECT_THAT(no_disk.status().message(), HasSubstr("no --offload-dir"));
}

// A budget larger than the model that still holds nothing: the refusal says which reserve took
// the room and which flags lower it (placer plan --devices cuda:0=100MiB,cpu=2GiB on the small
// preset once read "cpu hold 0 B after reserves" and nothing more).
TEST(PlannerTest, DoesNotFitNamesTheReservesThatTookTheRoom) {
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 10, 10));  // 61 bytes
  PlanOptions options;
  options.activation_reserve_bytes = 2000;
  absl::StatusOr<Plan> plan = PlanPlacement(tree, Budgets({{"cpu", 1500}}), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("cpu hold 0 B after reserves"));
  EXPECT_THAT(plan.status().message(),
              HasSubstr("reserves: cpu (budget 1.46 KiB) holds back 1.95 KiB for activations"));
  EXPECT_THAT(plan.status().message(), HasSubstr("--max-batch-size"));
  EXPECT_THAT(plan.status().message(), HasSubstr("--max-seq-len"));

  // Nothing held back: no clause about it.
  absl::StatusOr<Plan> plain = PlanPlacement(tree, Budgets({{"cpu", 10}}), {});
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.status().message(), Not(HasSubstr("holds back")));
}

TEST(PlannerTest, UnlistedDevicesAreNotUsed) {
  const ModuleTree tree = BuildTree(DecoderSpec(2, 10, 1, 1));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 0}, {"cuda:1", 100}, {"cpu", 100}}));
  EXPECT_EQ(MapOf(plan), (std::map<std::string, std::string>{{"", "cuda:1"}}));
  EXPECT_EQ(plan.execution_device, Device::Cuda(1));
}

TEST(PlannerTest, DeterministicAndHandlesThousandLayers) {
  const ModuleTree tree = BuildTree(DecoderSpec(1000, 1000, 5000, 5000));
  PlanOptions options;
  options.strategy = Strategy::kBalanced;
  const auto budgets =
      Budgets({{"cuda:0", 300000}, {"cuda:1", 300000}, {"cpu", 300000}, {"disk", 1u << 30}});
  const Plan first = MustPlan(tree, budgets, options);
  const Plan second = MustPlan(tree, budgets, options);
  EXPECT_EQ(first.device_map, second.device_map);
  EXPECT_EQ(first.device_map.size(), 1003u);
  EXPECT_EQ(first.reasons, second.reasons);
}

// --offload-exec auto degrades instead of refusing: two staging slots on the GPU, then one,
// then the offloaded blocks run on the cpu. Layers are 10 bytes; embed, norm, head 1 each.
TEST(OffloadExecTest, TwoSlotsThenOneSlotThenTheCpu) {
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 1, 1));
  const Plan two = MustPlan(tree, Budgets({{"cuda:0", 35}, {"cpu", 100}}));
  EXPECT_TRUE(two.offload_staged);
  EXPECT_EQ(two.staging_slots, 2);
  EXPECT_EQ(two.devices[0].staging_reserve_bytes, 20u);
  EXPECT_THAT(two.execution_reason, HasSubstr("staged onto cuda:0 through two slots"));

  // 15 bytes hold one 10-byte slot but not two.
  const Plan one = MustPlan(tree, Budgets({{"cuda:0", 15}, {"cpu", 100}}));
  EXPECT_TRUE(one.offload_staged);
  EXPECT_EQ(one.staging_slots, 1);
  EXPECT_EQ(one.execution_device, Device::Cuda(0));
  EXPECT_EQ(one.devices[0].staging_reserve_bytes, 10u);
  EXPECT_THAT(one.execution_reason, HasSubstr("through one slot"));
  EXPECT_THAT(one.execution_reason, HasSubstr("not staged onto cuda:0 through two slots"));

  // 6 bytes hold no slot: the layers run on the cpu, which keeps their KV and activations.
  const Plan cpu = MustPlan(tree, Budgets({{"cuda:0", 6}, {"cpu", 100}}));
  EXPECT_FALSE(cpu.offload_staged);
  EXPECT_EQ(cpu.staging_slots, 0);
  EXPECT_EQ(cpu.execution_device, Device::Cpu());
  EXPECT_EQ(cpu.devices[0].staging_reserve_bytes, 0u);
  EXPECT_EQ(MapOf(cpu).at("model.layers"), "cpu");
  EXPECT_EQ(MapOf(cpu).at("model.embed_tokens"), "cuda:0");
  EXPECT_THAT(cpu.execution_reason, HasSubstr("run on cpu where their weights live"));
  EXPECT_THAT(cpu.execution_reason, HasSubstr("not staged onto cuda:0 through one slot"));
}

TEST(OffloadExecTest, TheFlagForcesOrForbidsAChoice) {
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 1, 1));
  PlanOptions cpu_only;
  cpu_only.offload_exec = OffloadExec::kCpu;
  const Plan forced = MustPlan(tree, Budgets({{"cuda:0", 35}, {"cpu", 100}}), cpu_only);
  EXPECT_EQ(forced.execution_device, Device::Cpu());
  EXPECT_FALSE(forced.offload_staged);

  PlanOptions gpu_only;
  gpu_only.offload_exec = OffloadExec::kGpu;
  absl::StatusOr<Plan> refused = PlanPlacement(tree, Budgets({{"cuda:0", 6}, {"cpu", 100}}), gpu_only);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("the model does not fit: cuda:0 cannot hold the reserves"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("also tried: staged onto cuda:0 through two slots"));

  // --no-prefetch: one slot is all staging needs.
  PlanOptions no_prefetch;
  no_prefetch.prefetch = false;
  const Plan one = MustPlan(tree, Budgets({{"cuda:0", 35}, {"cpu", 100}}), no_prefetch);
  EXPECT_EQ(one.staging_slots, 1);
  EXPECT_EQ(one.devices[0].staging_reserve_bytes, 10u);

  EXPECT_EQ(*ParseOffloadExec("auto"), OffloadExec::kAuto);
  EXPECT_THAT(ParseOffloadExec("gpu0").status().message(), HasSubstr("--offload-exec 'gpu0'"));
}

// Accelerate's test with a 4-byte GPU 0 answers {"": "cpu"}; placer runs the layers on the cpu
// too, and still puts on the GPU what fits in it.
TEST(OffloadExecTest, AGpuTooSmallForAnyStagingSlot) {
  const ModuleTree tree = BuildTree(DecoderSpec(2, 10, 1, 1));
  const Plan plan = MustPlan(tree, Budgets({{"cuda:0", 4}, {"cpu", 1000}}));
  EXPECT_EQ(plan.execution_device, Device::Cpu());
  EXPECT_EQ(MapOf(plan).at("model.layers"), "cpu");
  EXPECT_LE(plan.devices[0].weights_bytes, 4u);
}

// The model does not fit even with the cheapest choice: by how many bytes.
TEST(OffloadExecTest, RefusalSaysByHowManyBytes) {
  const ModuleTree tree = BuildTree(DecoderSpec(4, 10, 10, 10));  // 61 bytes
  absl::StatusOr<Plan> plan =
      PlanPlacement(tree, Budgets({{"cuda:0", 5}, {"cpu", 10}, {"disk", 10}}), {});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("does not fit even with disk"));
  EXPECT_THAT(plan.status().message(), HasSubstr("short by"));
}

TEST(StrategyTest, ParsesNames) {
  EXPECT_EQ(*ParseStrategy("sequential"), Strategy::kSequential);
  EXPECT_EQ(*ParseStrategy("balanced"), Strategy::kBalanced);
  EXPECT_EQ(*ParseStrategy("balanced_low_0"), Strategy::kBalancedLow0);
  EXPECT_THAT(ParseStrategy("greedy").status().message(), HasSubstr("--strategy 'greedy'"));
}

}  // namespace
}  // namespace placer::placement
