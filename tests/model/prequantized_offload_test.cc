// Pre-quantized checkpoints (prequantized_fixture.h) placed off the execution device: layers on
// cpu are held and staged in their packed bytes, layers on disk are written to the offload
// store once and read from it at the next start.
#include <gtest/gtest.h>

#include "tests/model/prequantized_fixture.h"
#include "tests/model/model_checks.h"

namespace placer::model {
namespace {

using namespace prequantized_test;  // NOLINT: the fixture and its cases
using namespace model_checks;  // NOLINT: ExpectLogitsClose, StagedBytesOnWholeBlocks
using placement::Device;
using runtime::MemoryKind;

class PrequantizedOffload : public PrequantizedFixture {};

TEST_P(PrequantizedOffload, LayersOnCpuAreHeldAndStagedInTheirPackedBytes) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  RuntimePlan plan;
  plan.device_map = {{"", Device::Cuda(0)}, {"model.layers.1", Device::Cpu()}};
  plan.execution_device = Device::Cuda(0);
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  auto quantized = Load(checkpoint_, plan, &accounting);
  ASSERT_TRUE(reference && quantized);
  auto want = reference->Forward(prompt_, true);
  auto got = quantized->Forward(prompt_, true);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  ExpectLogitsClose(*got, *want, "layer 1 staged from cpu");
  const uint64_t packed = LayerBytes("model.layers.1");
  EXPECT_EQ(accounting->Used("cpu", MemoryKind::kWeights), packed);
  const uint64_t moved =
      StagedBytesOnWholeBlocks(*accounting, prompt_.size() * sizeof(int64_t), packed);
  EXPECT_GE(moved, packed);
  EXPECT_EQ(moved % packed, 0u) << moved << " bytes staged for a block of " << packed;
}

TEST_P(PrequantizedOffload, LayersOnDiskComeFromTheOffloadStoreOnceAndAreReused) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  ASSERT_NE(reference, nullptr);
  auto want = reference->Forward(prompt_, true);
  ASSERT_TRUE(want.ok());
  const fs::path store = dir_ / "offload" / "placer-offload.safetensors";
  fs::file_time_type written;
  for (int start = 0; start < 2; ++start) {
    RuntimePlan plan;
    plan.device_map = {{"", Device::Cpu()}, {"model.layers.0", Device::Disk()}};
    plan.execution_device = Device::Cpu();
    plan.offload_dir = (dir_ / "offload").string();
    auto quantized = Load(checkpoint_, plan);
    ASSERT_NE(quantized, nullptr);
    auto got = quantized->Forward(prompt_, true);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectLogitsClose(*got, *want, absl::StrCat("layer 0 on disk, start ", start));
    ASSERT_TRUE(fs::exists(store));
    if (start == 0) written = fs::last_write_time(store);
    EXPECT_EQ(fs::last_write_time(store), written) << "the packed store is written once";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PrequantizedOffload, ::testing::ValuesIn(PrequantizedCases()),
                         CaseName);

}  // namespace
}  // namespace placer::model
