// Any valid device map gives the single-device answer: the same checkpoint run on one device,
// across 2 and 4 virtual GPUs, partly on cpu or disk with staging, and fully offloaded gives
// the same logits, and the transfer counters equal what the map predicts.
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "tests/model/device_map_fixture.h"

namespace placer::model {
namespace {

using namespace device_map_test;  // NOLINT: the fixture, its architectures and maps

TEST_P(DeviceMaps, SpreadAcrossTwoAndFourVirtualGpus) {
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), Gpu(1), Gpu(1)}, Gpu(1)), Gpu(0)),
                   "2 GPUs");
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(1), Gpu(2), Gpu(3)}, Gpu(3)), Gpu(0)),
                   "4 GPUs");
}

TEST_P(DeviceMaps, PartOnCpuOrDiskStagedOntoTheExecutionGpu) {
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), kCpu, kCpu}, Gpu(1)), Gpu(0)),
                   "part on cpu");
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kDisk, Gpu(1), kDisk}, kCpu), Gpu(0)),
                   "part on disk");
  ExpectSameAnswer(
      PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kDisk, Gpu(1), kDisk}, kCpu), Gpu(0), false),
      "part on disk, no prefetch");
}

TEST_P(DeviceMaps, EverythingOffloaded) {
  ExpectSameAnswer(PlanOf({{"", kDisk}}, Gpu(0)), "all on disk, run on a GPU");
  ExpectSameAnswer(PlanOf({{"", kCpu}}, Gpu(0)), "all on cpu, run on a GPU");
  ExpectSameAnswer(PlanOf({{"", kDisk}}, kCpu), "all on disk, no GPU");
  ExpectSameAnswer(PlanOf(MapOf(arch(), kCpu, {kDisk, kCpu, kDisk, kDisk}, kCpu), kCpu),
                   "cpu and disk, no GPU");
}

// The planner's degradations (--offload-exec auto): one staging slot when the execution GPU
// has room for one only, then the offloaded blocks run on the cpu where they live.
TEST_P(DeviceMaps, OffloadedBlocksThroughOneSlotOrOnTheCpuGiveTheSameAnswer) {
  RuntimePlan one_slot =
      PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kCpu, Gpu(1), kDisk}, kCpu), Gpu(0), false);
  one_slot.staging_slots = 1;
  ExpectSameAnswer(one_slot, "staged through one slot");
  // The planner stages onto a later GPU when the first cannot hold the slots.
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kCpu, Gpu(1), kDisk}, kCpu), Gpu(1)),
                   "staged onto cuda:1");

  const DeviceMap spread = MapOf(arch(), Gpu(0), {Gpu(0), kCpu, Gpu(1), kDisk}, kCpu);
  ExpectSameAnswer(PlanOf(spread, kCpu), "offloaded blocks run on the cpu");
  Loaded loaded = Load(PlanOf(spread, kCpu));
  ASSERT_NE(loaded.model, nullptr);
  ASSERT_TRUE(loaded.model->Forward(prompt_, /*all_positions=*/false).ok());
  for (const std::string device : {"cuda:0", "cuda:1", "cpu"}) {
    EXPECT_EQ(loaded.accounting->Used(device, MemoryKind::kStaging), 0u)
        << device << ": nothing is staged when offloaded blocks run on the cpu";
  }
  // Only activations cross (a row of 64 floats per move), never the layers' weights.
  EXPECT_LT(loaded.accounting->Transferred("cpu", "cuda:0"), BytesOf(arch().layer_prefix + "1"));
  EXPECT_EQ(loaded.accounting->Transferred("disk", "cuda:0"), 0u);
}

TEST_P(DeviceMaps, IncrementalDecodingOnASpreadMapEqualsTheFullForward) {
  Loaded loaded =
      Load(PlanOf(MapOf(arch(), Gpu(0), {Gpu(1), kDisk, kCpu, Gpu(1)}, Gpu(0)), Gpu(0)));
  ASSERT_NE(loaded.model, nullptr);
  auto sequence = loaded.model->NewSequence(static_cast<int64_t>(prompt_.size()));
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  const int64_t vocab = loaded.model->vocab_size();
  for (size_t i = 0; i < prompt_.size(); ++i) {
    auto step = loaded.model->Extend(**sequence, {prompt_[i]});
    ASSERT_TRUE(step.ok()) << step.status();
    for (int64_t v = 0; v < vocab; ++v) {
      const float want = expected_.values[i * vocab + v];
      ASSERT_NEAR(step->values[v], want, 1e-4f * std::max(1.0f, std::abs(want)))
          << "position " << i << " logit " << v;
    }
  }
}

TEST_P(DeviceMaps, ABatchOfSequencesInOnePassEqualsEachAlone) {
  Loaded alone = Load(RuntimePlan::AllOnCpu());
  Loaded batched =
      Load(PlanOf(MapOf(arch(), Gpu(0), {Gpu(1), kDisk, kCpu, Gpu(1)}, Gpu(0)), Gpu(0)));
  ASSERT_NE(alone.model, nullptr);
  ASSERT_NE(batched.model, nullptr);
  // Steps of three sequences: prefills of different lengths, decodes, and one joining late.
  const std::vector<std::vector<std::vector<int32_t>>> steps = {
      {{5, 17, 42, 99, 7}, {250, 3, 8}, {}},
      {{11}, {12, 13}, {1, 2, 3, 4}},
      {{21}, {22}, {23}},
  };
  const int64_t vocab = alone.model->vocab_size();
  std::vector<std::unique_ptr<SequenceCache>> alone_caches, batched_caches;
  for (int i = 0; i < 3; ++i) {
    alone_caches.push_back(*alone.model->NewSequence(16));
    batched_caches.push_back(*batched.model->NewSequence(16));
  }
  for (size_t step = 0; step < steps.size(); ++step) {
    std::vector<CausalLm::SequenceStep> batch;
    std::vector<float> want;
    for (size_t i = 0; i < 3; ++i) {
      if (steps[step][i].empty()) continue;
      batch.push_back({batched_caches[i].get(), steps[step][i]});
      auto logits = alone.model->Extend(*alone_caches[i], steps[step][i]);
      ASSERT_TRUE(logits.ok()) << logits.status();
      want.insert(want.end(), logits->values.begin(), logits->values.end());
    }
    auto got = batched.model->ExtendBatch(batch);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->shape, (std::vector<int64_t>{static_cast<int64_t>(batch.size()), vocab}));
    for (size_t v = 0; v < want.size(); ++v) {
      ASSERT_NEAR(got->values[v], want[v], 1e-4f * std::max(1.0f, std::abs(want[v])))
          << "step " << step << ", value " << v;
    }
  }
  EXPECT_EQ(batched_caches[0]->length(), 7);
  EXPECT_EQ(batched_caches[2]->length(), 5);

  // An entry that does not fit fails the whole step, naming it, and advances nobody.
  auto refused = batched.model->ExtendBatch(
      {{batched_caches[0].get(), {1}}, {batched_caches[1].get(), std::vector<int32_t>(20, 1)}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("batch[1]: token_ids"), std::string::npos)
      << refused.status();
  EXPECT_EQ(batched_caches[0]->length(), 7);
}

TEST_P(DeviceMaps, MapsThatCannotRunAreRefusedNamingTheBlock) {
  RuntimePlan split = PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), Gpu(1), Gpu(1)}, Gpu(1)), Gpu(0));
  const std::string layer = arch().layer_prefix + "2";
  split.device_map.emplace_back(layer + ".mlp", kCpu);
  split.virtual_gpus = true;
  auto refused = LoadCausalLm(checkpoint_, ModelRuntime{split, nullptr});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("block " + layer + " is split"), std::string::npos)
      << refused.status();

  RuntimePlan uncovered = PlanOf({{arch().embed, Gpu(0)}}, Gpu(0));
  uncovered.virtual_gpus = true;
  auto missing = LoadCausalLm(checkpoint_, ModelRuntime{uncovered, nullptr});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no entry covers tensor"), std::string::npos)
      << missing.status();
}

INSTANTIATE_TEST_SUITE_P(Architectures, DeviceMaps,
                         ::testing::Values(kLlama, kGpt2, kLlamaBiases, kGpt2Untied),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
