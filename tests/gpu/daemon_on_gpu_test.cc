// placerd on a real GPU, probing it (no --devices): the probe reports the card's total and free
// memory as nvidia-smi and the CUDA runtime see them, the plan puts the weights on it, the
// metrics agree with cudaMemGetInfo, and a GPU out-of-memory inside one request fails that
// request with RESOURCE_EXHAUSTED while the daemon keeps serving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/placer_client.h"
#include "placement/cuda_probe.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"
#include "tests/gpu/gpu_skip.h"

#if PLACER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
constexpr double kMiB = 1024.0 * 1024.0;

// nvidia-smi's memory.total of GPU 0 in bytes: a reading independent of placer's probe.
std::optional<double> NvidiaSmiTotalBytes() {
  const CommandResult smi = RunCommand(
      "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0");
  if (smi.exit_code != 0) return std::nullopt;
  return std::stod(smi.output) * kMiB;
}

struct CudaMemory {
  double free = 0, total = 0;
};
CudaMemory CudaMemGetInfo() {
  CudaMemory memory;
#if PLACER_WITH_CUDA
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    memory = {static_cast<double>(free_bytes), static_cast<double>(total_bytes)};
  }
#endif
  return memory;
}

class DaemonOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    PLACER_SKIP_WITHOUT_GPU();
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-gpu-daemon-", getpid());
    fs::remove_all(dir_);
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", (dir_ / "model").string(),
                                       " --arch llama --layers 4 --hidden 1024 --heads 16 "
                                       "--kv-heads 8 --intermediate 2816 --vocab 2000 "
                                       "--max-positions 4096 --seed 23 > /dev/null")
                              .c_str()),
              0);
    daemon_ = std::make_unique<DaemonProcess>(DaemonArgs(
        ports_, {"--model", (dir_ / "model").string(), "--offload-dir", (dir_ / "offload").string(),
                 "--max-seq-len", "4096", "--max-batch-size", "1"}));
    ASSERT_TRUE(WaitServing(ports_, seconds(120))) << daemon_->Log();
  }
  void TearDown() override {
    daemon_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  absl::Status Generate(int prompt_tokens, int new_tokens) {
    client::PlacerClient client({ports_.target(), seconds(60)});
    v1::GenerateRequest request;
    for (int i = 0; i < prompt_tokens; ++i) request.add_prompt_token_ids(1 + (i * 37) % 1999);
    request.mutable_params()->set_max_new_tokens(new_tokens);
    request.mutable_params()->set_temperature(0);
    request.mutable_params()->set_ignore_eos(true);
    return client.Generate(request, [](const v1::GenerateResponse&) {});
  }

  fs::path dir_;
  StartedDaemon ports_ = PickPorts();
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonOnGpu, ProbeReportsTheCardsMemoryAndThePlanUsesIt) {
  const auto probed = placement::ReadCudaGpuMemory();
  ASSERT_TRUE(probed.ok()) << probed.status();
  ASSERT_FALSE(probed->empty());
  const placement::CudaGpuMemory& gpu = probed->front();
  EXPECT_GT(gpu.free_bytes, 0u);
  EXPECT_LE(gpu.free_bytes, gpu.total_bytes);
  const std::optional<double> smi_total = NvidiaSmiTotalBytes();
  ASSERT_TRUE(smi_total.has_value()) << "nvidia-smi did not answer";
  // The runtime's total leaves out what the driver keeps for itself: within 2% of nvidia-smi's.
  EXPECT_NEAR(static_cast<double>(gpu.total_bytes), *smi_total, 0.02 * *smi_total);

  client::PlacerClient client({ports_.target(), seconds(10)});
  const auto info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  const v1::DeviceInfo* cuda0 = nullptr;
  for (const v1::DeviceInfo& device : info->devices()) {
    if (device.name() == "cuda:0") cuda0 = &device;
  }
  ASSERT_NE(cuda0, nullptr) << "the plan has no cuda:0: " << info->DebugString();
  EXPECT_EQ(cuda0->total_bytes(), gpu.total_bytes) << "the plan's cuda:0 is the probed card";
  // ~120 MiB of F32 weights fit many times over: the planner put all of them on the GPU.
  EXPECT_GT(cuda0->weights_bytes(), 100 * kMiB);
  for (const v1::DeviceInfo& device : info->devices()) {
    if (device.name() != "cuda:0") {
      EXPECT_EQ(device.weights_bytes(), 0u) << device.name();
    }
  }
  std::printf("gpu-check: probe total %.0f MiB free %.0f MiB, nvidia-smi total %.0f MiB, "
              "weights on cuda:0 %.1f MiB\n",
              gpu.total_bytes / kMiB, gpu.free_bytes / kMiB, *smi_total / kMiB,
              cuda0->weights_bytes() / kMiB);
}

TEST_F(DaemonOnGpu, DeviceMemoryMetricsAgreeWithCudaMemGetInfo) {
  const std::optional<std::string> body = HttpGet(ports_.metrics_port, "/metrics");
  ASSERT_TRUE(body.has_value());
  const CudaMemory cuda = CudaMemGetInfo();  // read right after the scrape; nothing runs now
  std::string error;
  const std::optional<Exposition> scrape = ParseExposition(*body, &error);
  ASSERT_TRUE(scrape.has_value()) << error;
  const auto total = scrape->Value("placer_device_memory_total_bytes", {{"device", "cuda:0"}});
  const auto free = scrape->Value("placer_device_memory_free_bytes", {{"device", "cuda:0"}});
  ASSERT_TRUE(total && free) << *body;
  EXPECT_EQ(*total, cuda.total);
  // This process's own CUDA context takes a few hundred MiB between the two readings at most.
  EXPECT_NEAR(*free, cuda.free, 1024 * kMiB);
  const auto nv_total = scrape->Find("nv_gpu_memory_total_bytes");
  ASSERT_EQ(nv_total.size(), 1u) << "one card, one nv_gpu_memory_total_bytes sample";
  // Triton's metric is in MB; a mismatch of units shows as a factor of about 1e6.
  EXPECT_NEAR(nv_total.front().value * 1e6, cuda.total, 0.05 * cuda.total)
      << "nv_gpu_memory_total_bytes is in MB, as Triton writes it";
  const auto weights = scrape->Value("placer_device_memory_used_bytes",
                                     {{"device", "cuda:0"}, {"kind", "weights"}});
  ASSERT_TRUE(weights.has_value());
  EXPECT_LE(*weights, cuda.total - cuda.free) << "placer cannot hold more than is in use";
  std::printf("gpu-check: metrics cuda:0 total %.0f free %.0f MiB; cudaMemGetInfo %.0f / %.0f MiB\n",
              *total / kMiB, *free / kMiB, cuda.total / kMiB, cuda.free / kMiB);
}

TEST_F(DaemonOnGpu, OutOfMemoryInsideOneRequestFailsItAndTheDaemonKeepsServing) {
#if PLACER_WITH_CUDA
  ASSERT_TRUE(Generate(8, 4).ok()) << "a small request works before the GPU is filled";
  // Take nearly all the card's free memory from this process, so that the daemon's next
  // long prompt (attention scores of 16 heads x 4000^2 floats, ~1 GiB) cannot be allocated.
  std::vector<void*> held;
  for (size_t chunk = size_t{1} << 30; chunk >= (size_t{1} << 20);) {
    void* block = nullptr;
    if (cudaMalloc(&block, chunk) == cudaSuccess) {
      held.push_back(block);
    } else {
      cudaGetLastError();  // clear the failed allocation's error
      chunk /= 2;
    }
  }
  std::printf("gpu-check: held %zu blocks; cuda free now %.0f MiB\n", held.size(),
              CudaMemGetInfo().free / kMiB);
  const absl::Status starved = Generate(4000, 2);
  for (void* block : held) cudaFree(block);
  EXPECT_EQ(starved.code(), absl::StatusCode::kResourceExhausted) << starved;
  EXPECT_NE(starved.message().find("out of memory"), std::string::npos) << starved;
  EXPECT_TRUE(daemon_->running()) << daemon_->Log();
  const absl::Status after = Generate(4000, 2);
  EXPECT_TRUE(after.ok()) << "the same request once memory is back: " << after;
  EXPECT_TRUE(Generate(8, 4).ok());
#else
  GTEST_SKIP() << "not built with CUDA";
#endif
}

}  // namespace
}  // namespace placer::testing
