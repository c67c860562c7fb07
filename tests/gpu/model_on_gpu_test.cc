// The model on a real GPU: a map over cuda:0, cpu and disk gives the CPU's logits (1e-4 in F32,
// BF16 precision in BF16), F16 computes on the GPU, and staging through reused slots on the
// side stream never lets a block read the weights of the block staged after it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "tests/gpu/gpu_skip.h"
#include "tests/model/model_checks.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using loader::DType;
using placement::Device;
using runtime::MemoryKind;
using runtime::RuntimePlan;
using model_checks::WorstRowRelativeError;

class ModelOnGpu : public ::testing::Test {
 protected:
  // Layers wide enough (hidden 512) that a layer's staging copy takes longer than launching
  // its kernels: a missing fence then lets the next copy land while compute still reads.
  void WriteCheckpoint(const std::string& args) {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-gpu-", getpid());
    fs::remove_all(dir_);
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir_.string(), " ",
                                       args, " > /dev/null")
                              .c_str()),
              0);
    auto checkpoint = loader::Checkpoint::Open(dir_.string());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
  }
  void SetUp() override {
    PLACER_SKIP_WITHOUT_GPU();
    WriteCheckpoint("--arch llama --layers 6 --hidden 512 --heads 8 --kv-heads 4 "
                    "--intermediate 1536 --vocab 1000 --seed 22");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  struct Loaded {
    std::unique_ptr<CausalLm> model;
    std::shared_ptr<runtime::RuntimeAccounting> accounting;
  };
  Loaded Load(DType dtype, RuntimePlan plan) {
    plan.virtual_gpus = false;  // real CUDA memory, streams and kernels
    plan.offload_dir = (dir_ / "offload").string();
    ModelRuntime runtime{plan, std::make_shared<runtime::RuntimeAccounting>(
                                   std::vector<std::string>{"cuda:0", "cpu", "disk"})};
    runtime.max_sequence_length = 128;
    runtime.kv_cache_blocks = 16;
    runtime.compute_dtype = dtype;
    auto model = LoadCausalLm(checkpoint_, runtime);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return {};
    return {*std::move(model), runtime.accounting};
  }
  // Embedding and head on cuda:0, layer 1 on cpu and 3 on disk (both staged onto cuda:0).
  static RuntimePlan SpreadPlan(int staging_slots = 2, bool prefetch = true) {
    RuntimePlan plan;
    plan.device_map = {{"", Device::Cuda(0)},
                       {"model.layers.1", Device::Cpu()},
                       {"model.layers.3", Device::Disk()}};
    plan.execution_device = Device::Cuda(0);
    plan.staging_slots = staging_slots;
    plan.prefetch = prefetch;
    return plan;
  }
  // Every decoder layer offloaded: each forward pass stages all of them through the slots.
  static RuntimePlan AllOffloaded(int staging_slots) {
    RuntimePlan plan = SpreadPlan(staging_slots, staging_slots > 1);
    plan.device_map = {{"", Device::Cuda(0)}, {"model.layers", Device::Cpu()}};
    return plan;
  }

  Logits ForwardOf(const Loaded& loaded) {
    if (loaded.model == nullptr) {
      ADD_FAILURE() << "the model did not load";
      return {};
    }
    auto logits = loaded.model->Forward(prompt_, /*all_positions=*/true);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? *std::move(logits) : Logits{};
  }
  const std::vector<int32_t> prompt_ = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43, 383, 27};
  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
};

TEST_F(ModelOnGpu, F32OverCudaCpuAndDiskGivesTheCpuLogits) {
  const Logits want = ForwardOf(Load(DType::kF32, RuntimePlan::AllOnCpu()));
  Loaded spread = Load(DType::kF32, SpreadPlan());
  ASSERT_NE(spread.model, nullptr);
  EXPECT_GT(spread.accounting->Used("cuda:0", MemoryKind::kWeights), 0u) << "weights on the GPU";
  for (int pass = 0; pass < 2; ++pass) {  // the second pass uses the prefetched block
    const double worst = WorstRowRelativeError(ForwardOf(spread), want);
    EXPECT_LT(worst, 1e-4) << "pass " << pass;
    std::printf("gpu-check: F32 cuda:0+cpu+disk vs cpu, worst relative error %.3g\n", worst);
  }
  EXPECT_GT(spread.accounting->Transferred("cpu", "cuda:0"), 0u) << "layer 1 was staged";
}

TEST_F(ModelOnGpu, Bf16OnTheGpuFollowsF32ToBf16PrecisionAndTheCpuBf16) {
  const Logits f32 = ForwardOf(Load(DType::kF32, RuntimePlan::AllOnCpu()));
  const Logits cpu_bf16 = ForwardOf(Load(DType::kBF16, RuntimePlan::AllOnCpu()));
  const Logits gpu_bf16 = ForwardOf(Load(DType::kBF16, SpreadPlan()));
  const double vs_f32 = WorstRowRelativeError(gpu_bf16, f32);
  const double vs_cpu_bf16 = WorstRowRelativeError(gpu_bf16, cpu_bf16);
  // As tests/model/compute_dtype_test.cc: a few layers of BF16 rounding stay within a few
  // percent; computing in F32 by mistake would be bit-close to F32.
  EXPECT_LT(vs_f32, 0.05);
  EXPECT_GT(vs_f32, 1e-5) << "BF16 on the GPU should not equal F32: was it computed in F32?";
  EXPECT_LT(vs_cpu_bf16, 0.05) << "GPU and CPU BF16 kernels differ only in summation order";
  std::printf("gpu-check: BF16 on cuda:0 vs F32 cpu %.3g, vs BF16 cpu %.3g\n", vs_f32, vs_cpu_bf16);
}

TEST_F(ModelOnGpu, F16ComputesOnTheGpu) {
  const Logits f32 = ForwardOf(Load(DType::kF32, RuntimePlan::AllOnCpu()));
  Loaded f16 = Load(DType::kF16, SpreadPlan());
  ASSERT_NE(f16.model, nullptr) << "F16 is refused only without a real GPU";
  Loaded f32_gpu = Load(DType::kF32, SpreadPlan());
  ASSERT_NE(f32_gpu.model, nullptr);
  // F16 weights hold half of F32's bytes on the GPU: they were converted, not kept in F32.
  EXPECT_EQ(f16.accounting->Used("cuda:0", MemoryKind::kWeights) * 2,
            f32_gpu.accounting->Used("cuda:0", MemoryKind::kWeights));
  const double worst = WorstRowRelativeError(ForwardOf(f16), f32);
  EXPECT_LT(worst, 0.01) << "F16 keeps 11 significant bits";
  EXPECT_GT(worst, 1e-6);
  std::printf("gpu-check: F16 on cuda:0 vs F32 cpu, worst relative error %.3g\n", worst);
}

// Per-slot fences: with every layer offloaded through 2 (or 1) reused slots, the copy of layer
// i+2 goes into the slot layer i computes from. Without the fence the side stream may start
// that copy while layer i's kernels are still queued, and they read the wrong layer's weights:
// some pass's logits then leave the CPU's. Many passes, so a race that is rare still shows.
TEST_F(ModelOnGpu, SlotFenceKeepsReusedStagingSlotsFromBeingOverwrittenEarly) {
  const Logits want = ForwardOf(Load(DType::kF32, RuntimePlan::AllOnCpu()));
  for (int slots : {2, 1}) {
    Loaded offloaded = Load(DType::kF32, AllOffloaded(slots));
    ASSERT_NE(offloaded.model, nullptr);
    double worst = 0;
    for (int pass = 0; pass < 40; ++pass) {
      const double error = WorstRowRelativeError(ForwardOf(offloaded), want);
      worst = std::max(worst, error);
      ASSERT_LT(error, 1e-4) << slots << " slot(s), pass " << pass
                             << ": a block read weights staged for another block";
    }
    EXPECT_GT(offloaded.accounting->Transferred("cpu", "cuda:0"), 0u);
    std::printf("gpu-check: %d staging slot(s), 40 fully offloaded passes, worst %.3g\n", slots,
                worst);
  }
}

}  // namespace
}  // namespace placer::model
