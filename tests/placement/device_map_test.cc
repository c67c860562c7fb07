#include "placement/device_map.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/device_map_validation.h"
#include "placement/planner.h"
#include "tests/placement/test_trees.h"

namespace placer::placement {
namespace {

using ::testing::HasSubstr;
using testing::BuildTree;
using testing::Budgets;
using testing::DecoderSpec;

DeviceMap MustParse(const std::string& json) {
  absl::StatusOr<DeviceMap> map = ParseDeviceMapJson(json, "map.json");
  EXPECT_TRUE(map.ok()) << map.status();
  return map.ok() ? *map : DeviceMap{};
}

TEST(DeviceMapJsonTest, WritesGpusAsIntegersInExecutionOrder) {
  const DeviceMap map = {{"model.layers.0", Device::Cuda(0)},
                         {"model.norm", Device::Disk()},
                         {"lm_head", Device::Cpu()}};
  EXPECT_EQ(DeviceMapToJson(map).dump(),
            R"({"model.layers.0":0,"model.norm":"disk","lm_head":"cpu"})");
}

TEST(DeviceMapJsonTest, ParsesHuggingFaceForm) {
  const DeviceMap map =
      MustParse(R"({"model.layers.0": 0, "model.layers.1": "cuda:1", "lm_head": "cpu",
                    "model.norm": "disk"})");
  ASSERT_EQ(map.size(), 4u);
  EXPECT_EQ(map[0].second, Device::Cuda(0));
  EXPECT_EQ(map[1].second, Device::Cuda(1));
  EXPECT_EQ(map[2].first, "lm_head");
  EXPECT_EQ(map[3].second, Device::Disk());
}

TEST(DeviceMapJsonTest, ParseErrorsNameTheModule) {
  EXPECT_THAT(ParseDeviceMapJson("{", "m.json").status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseDeviceMapJson("[]", "m.json").status().message(), HasSubstr("JSON object"));
  EXPECT_THAT(ParseDeviceMapJson(R"({"lm_head": "tpu"})", "m.json").status().message(),
              HasSubstr("module 'lm_head': unknown device 'tpu'"));
  EXPECT_THAT(ParseDeviceMapJson(R"({"lm_head": -1})", "m.json").status().message(),
              HasSubstr("module 'lm_head'"));
  EXPECT_THAT(ParseDeviceMapJson(R"({"lm_head": 1.5})", "m.json").status().message(),
              HasSubstr("module 'lm_head'"));
}

class ValidateTest : public ::testing::Test {
 protected:
  ValidateTest() : tree_(BuildTree(DecoderSpec(2, 10, 10, 0, /*tied=*/true))) {}
  absl::StatusOr<Plan> Validate(const std::string& json, std::uint64_t gpu_bytes = 100) {
    return ValidateDeviceMap(tree_, MustParse(json),
                             Budgets({{"cuda:0", gpu_bytes}, {"cpu", 100}, {"disk", 100}}), {});
  }
  ModuleTree tree_;
};

TEST_F(ValidateTest, AcceptsAValidMapAndAccountsIt) {
  absl::StatusOr<Plan> plan = Validate(
      R"({"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": "cpu",
          "model.norm": "disk", "lm_head": 0})");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->devices[0].weights_bytes, 20u);
  EXPECT_EQ(plan->devices[1].weights_bytes, 10u);
  EXPECT_EQ(plan->devices[2].weights_bytes, 1u);
  // Two staging slots the size of the largest offloaded block (layer 1, 10 bytes).
  EXPECT_EQ(plan->devices[0].staging_reserve_bytes, 20u);
}

TEST(ValidateRowLookupTest, AnOffloadedEmbeddingTakesNoStagingRoomUnlessTiedToTheHead) {
  for (bool tied : {false, true}) {
    ModuleTreeSpec spec = DecoderSpec(2, 10, 30, 5, tied);
    spec.tensors.front().row_lookup = true;  // as ModuleTreeSpecForModel marks embeddings
    const ModuleTree tree = BuildTree(spec);
    absl::StatusOr<Plan> plan = ValidateDeviceMap(
        tree,
        MustParse(R"({"model.embed_tokens": "cpu", "model.layers": 0, "model.norm": 0,
                      "lm_head": "cpu"})"),
        Budgets({{"cuda:0", 100}, {"cpu", 100}}), {});
    ASSERT_TRUE(plan.ok()) << plan.status();
    // Untied: only the 5-byte lm_head is staged. Tied: the shared 30 bytes are, for the head.
    EXPECT_EQ(plan->devices[0].staging_reserve_bytes, tied ? 60u : 10u) << "tied " << tied;
  }
}

TEST_F(ValidateTest, AcceptsWhatThePlannerWrites) {
  const auto budgets = Budgets({{"cuda:0", 30}, {"cpu", 100}});
  absl::StatusOr<Plan> planned = PlanPlacement(tree_, budgets, {});
  ASSERT_TRUE(planned.ok()) << planned.status();
  absl::StatusOr<Plan> validated = ValidateDeviceMap(tree_, planned->device_map, budgets, {});
  ASSERT_TRUE(validated.ok()) << validated.status();
  EXPECT_EQ(validated->device_map, planned->device_map);
  EXPECT_EQ(validated->devices[0].weights_bytes, planned->devices[0].weights_bytes);
}

TEST_F(ValidateTest, RefusesUnknownModule) {
  EXPECT_THAT(Validate(R"({"": 0, "model.layers.7": 0})").status().message(),
              HasSubstr("entry 'model.layers.7': no such module or tensor"));
  // A prefix test, not a substring one: "model.lay" is not a module.
  EXPECT_THAT(Validate(R"({"model.lay": 0})").status().message(),
              HasSubstr("entry 'model.lay': no such module"));
}

TEST_F(ValidateTest, RefusesUnknownDevice) {
  EXPECT_THAT(Validate(R"({"": 3})").status().message(),
              HasSubstr("entry '': unknown device cuda:3 (devices: cuda:0, cpu, disk)"));
}

TEST_F(ValidateTest, RefusesTensorCoveredTwice) {
  EXPECT_THAT(Validate(R"({"model": 0, "model.layers.0": "cpu", "lm_head": 0})")
                  .status()
                  .message(),
              HasSubstr("entry 'model.layers.0': tensor 'model.layers.0.mlp.weight' is "
                        "already covered by entry 'model'"));
}

TEST_F(ValidateTest, RefusesUncoveredTensor) {
  EXPECT_THAT(Validate(R"({"model": 0})").status().message(),
              HasSubstr("does not cover tensor 'lm_head.weight' (module 'lm_head')"));
}

TEST_F(ValidateTest, RefusesSplitNoSplitBlock) {
  EXPECT_THAT(Validate(R"({"model.embed_tokens": 0, "model.layers.0.mlp": 0,
                           "model.layers.0.attn": "cpu", "model.layers.1": 0,
                           "model.norm": 0, "lm_head": 0})")
                  .status()
                  .message(),
              HasSubstr("entry 'model.layers.0.mlp': splits the no-split block "
                        "'model.layers.0' (Layer)"));
}

TEST_F(ValidateTest, RefusesSplitTiedTensors) {
  EXPECT_THAT(Validate(R"({"model": 0, "lm_head": "cpu"})").status().message(),
              HasSubstr("split the tied tensors 'model.embed_tokens.weight' and "
                        "'lm_head.weight'"));
}

TEST_F(ValidateTest, RefusesOverBudgetNamingTheFirstModuleThatDoesNotFit) {
  EXPECT_THAT(Validate(R"({"": 0})", 25).status().message(),
              HasSubstr("overfills cuda:0: weights 31 B + reserves 0 B exceed its budget of "
                        "25 B by 6 B; entry '' is the first"));
  EXPECT_THAT(Validate(R"({"model.embed_tokens": 0, "model.layers.0": 0,
                           "model.layers.1": 0, "model.norm": 0, "lm_head": 0})", 25)
                  .status()
                  .message(),
              HasSubstr("entry 'model.layers.1' is the first that does not fit"));
}

TEST(CompactDeviceMapTest, MergesModulesWhoseTensorsShareADevice) {
  const ModuleTree tree = BuildTree(DecoderSpec(2, 10, 10, 10));
  std::vector<Device> devices(tree.tensors().size(), Device::Cuda(0));
  EXPECT_EQ(CompactDeviceMap(tree, devices), (DeviceMap{{"", Device::Cuda(0)}}));
  devices[*tree.FindTensor("model.layers.1.attn.weight")] = Device::Cpu();
  const DeviceMap map = CompactDeviceMap(tree, devices);
  const DeviceMap expected = {{"model.embed_tokens", Device::Cuda(0)},
                              {"model.layers.0", Device::Cuda(0)},
                              {"model.layers.1.mlp", Device::Cuda(0)},
                              {"model.layers.1.attn", Device::Cpu()},
                              {"model.norm", Device::Cuda(0)},
                              {"lm_head", Device::Cuda(0)}};
  EXPECT_EQ(map, expected);
}

}  // namespace
}  // namespace placer::placement
