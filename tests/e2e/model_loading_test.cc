// placerd --model on real checkpoints written by placer-make-checkpoint: a good one is loaded,
// served and described; a bad one ends the process with exit code 1 and a line naming the
// problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class ModelLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("placer-model-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteCheckpoint(const std::string& extra_args = "") {
    const CommandResult made = RunCommand(
        std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " + dir_.string() +
        " --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --intermediate 128"
        " --vocab 300 --seed 7 " + extra_args);
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

  // The demo model's shape: large enough that virtual devices of a few MiB split it.
  void WriteTinyPreset() {
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_.string() + " --arch llama --preset tiny --seed 1");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

  // Runs placerd on the checkpoint, expecting it to fail at start; returns its log.
  std::string ExpectStartFailure() {
    DaemonProcess daemon(DaemonArgs(PickPorts(), {"--model", dir_.string()}));
    const std::optional<int> code = daemon.WaitExit(seconds(30));
    EXPECT_TRUE(code.has_value()) << "placerd kept running on a bad checkpoint\n" << daemon.Log();
    EXPECT_EQ(code.value_or(-1), 1) << daemon.Log();
    return daemon.Log();
  }

  fs::path dir_;
};

TEST_F(ModelLoading, ReadyModelIsServingDescribedAndAnswersForward) {
  WriteCheckpoint();
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--threads", "2"}));
  client::PlacerClient client({ports.target(), seconds(5)});
  ASSERT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();
  EXPECT_EQ(RunCommand(std::string(PLACER_CLI_PATH) + " --target " + ports.target() + " health")
                .exit_code,
            0);
  // libtorch must really be calling OpenBLAS, not the reference BLAS (check, don't assume).
  EXPECT_NE(daemon.Log().find("openblas"), std::string::npos) << daemon.Log();
  EXPECT_NE(daemon.Log().find("compute: 2 thread(s)"), std::string::npos) << daemon.Log();

  const CommandResult json = RunCommand(std::string(PLACER_CLI_PATH) + " --target " +
                                        ports.target() + " info --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json info = nlohmann::json::parse(json.output);
  EXPECT_EQ(info.at("state"), "ready");
  EXPECT_EQ(info.at("architecture"), "LlamaForCausalLM");
  EXPECT_EQ(info.at("dtype"), "F32");
  EXPECT_EQ(info.at("model_path"), dir_.string());
  // Llama with untied lm_head: embeddings + lm_head + final norm + per layer q,k,v,o, MLP, norms.
  const int64_t hidden = 64, kv_dim = 2 * (64 / 4), intermediate = 128, vocab = 300, layers = 2;
  const int64_t per_layer = 2 * hidden * hidden + 2 * hidden * kv_dim +
                            3 * hidden * intermediate + 2 * hidden;
  const int64_t expected = 2 * vocab * hidden + hidden + layers * per_layer;
  EXPECT_EQ(std::stoll(info.at("parameter_count").get<std::string>()), expected);

  v1::ForwardRequest forward;
  for (int token : {1, 5, 9, 200}) forward.add_token_ids(token);
  auto last = client.Forward(forward);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->logits().dtype(), "float32");
  ASSERT_EQ(last->logits().shape_size(), 2);
  EXPECT_EQ(last->logits().shape(0), 1);
  EXPECT_EQ(last->logits().shape(1), vocab);
  ASSERT_EQ(last->logits().data().size(), vocab * sizeof(float));

  forward.set_all_positions(true);
  auto all = client.Forward(forward);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->logits().shape(0), 4);
  ASSERT_EQ(all->logits().data().size(), 4 * vocab * sizeof(float));
  // The same prompt gives the same numbers; the last row is the last-position answer, up to
  // float rounding: for the last position alone the lm_head multiplies one row, not four, and
  // BLAS picks another kernel.
  std::vector<float> last_row(vocab), only_last(vocab);
  std::memcpy(last_row.data(), all->logits().data().data() + 3 * vocab * sizeof(float),
              vocab * sizeof(float));
  std::memcpy(only_last.data(), last->logits().data().data(), vocab * sizeof(float));
  for (int64_t v = 0; v < vocab; ++v) {
    ASSERT_NEAR(last_row[v], only_last[v], 1e-5f * std::max(1.0f, std::abs(only_last[v])))
        << "logit " << v;
  }

  forward.add_token_ids(static_cast<int>(vocab));
  auto bad = client.Forward(forward);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("token_ids[4]"), absl::string_view::npos)
      << bad.status();

  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.WaitExit(seconds(20)), 0) << daemon.Log();
}

TEST_F(ModelLoading, TextRequestsWithoutATokenizerSayItIsMissing) {
  WriteCheckpoint("--no-tokenizer");
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string()}));
  client::PlacerClient client({ports.target(), seconds(5)});
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto info = client.GetModelInfo();
        return info.ok() && info->state() == "ready";
      },
      seconds(30)))
      << daemon.Log();
  v1::TokenizeRequest tokenize;
  tokenize.set_text("hello");
  auto tokenized = client.Tokenize(tokenize);
  EXPECT_EQ(tokenized.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tokenized.status().message().find("tokenizer"), absl::string_view::npos);
  v1::ForwardRequest forward;
  forward.add_token_ids(3);
  EXPECT_TRUE(client.Forward(forward).ok());
}

TEST_F(ModelLoading, SigtermTurnsAServingWatchNotServingBeforeTheStreamEnds) {
  WriteCheckpoint();
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--drain-timeout", "5s"}));
  client::PlacerClient client({ports.target(), seconds(5)});
  ASSERT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(30));
  auto watch = client.health_stub().Watch(&context, grpc::health::v1::HealthCheckRequest());
  grpc::health::v1::HealthCheckResponse first;
  ASSERT_TRUE(watch->Read(&first));
  ASSERT_EQ(first.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  daemon.Signal(SIGTERM);
  std::vector<grpc::health::v1::HealthCheckResponse::ServingStatus> after;
  for (grpc::health::v1::HealthCheckResponse next; watch->Read(&next);) {
    after.push_back(next.status());
  }
  watch->Finish();
  ASSERT_FALSE(after.empty()) << "the stream ended without reporting NOT_SERVING";
  EXPECT_EQ(after.back(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(daemon.WaitExit(seconds(20)), 0) << daemon.Log();
}

// Starts placerd on the checkpoint with `extra` flags; returns the Forward logits of a fixed
// prompt and the ModelInfo once it serves.
std::pair<std::string, v1::ModelInfo> ServeAndForward(const fs::path& dir,
                                                      const std::vector<std::string>& extra) {
  std::vector<std::string> flags = {"--model", dir.string()};
  flags.insert(flags.end(), extra.begin(), extra.end());
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, flags));
  client::PlacerClient client({ports.target(), seconds(5)});
  EXPECT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();
  v1::ForwardRequest forward;
  for (int token : {4, 8, 15, 16, 23, 42}) forward.add_token_ids(token);
  forward.set_all_positions(true);
  auto logits = client.Forward(forward);
  EXPECT_TRUE(logits.ok()) << logits.status();
  auto info = client.GetModelInfo();
  EXPECT_TRUE(info.ok()) << info.status();
  return {logits.ok() ? logits->logits().data() : "", info.ok() ? *info : v1::ModelInfo()};
}

TEST_F(ModelLoading, VirtualGpusAndCpuShareTheModelAndTheMapIsReported) {
  WriteTinyPreset();
  const auto [spread_logits, spread] =
      ServeAndForward(dir_, {"--devices", "cuda:0=4.5MiB,cuda:1=1.5MiB,cpu=1GiB",
                             "--max-seq-len", "64", "--max-batch-size", "1"});
  std::set<std::string> used;
  for (const auto& [module, device] : spread.device_map()) used.insert(device);
  EXPECT_EQ(used, (std::set<std::string>{"0", "1", "cpu"}));
  EXPECT_EQ(spread.device_map().at("model.embed_tokens"), "0");
  EXPECT_EQ(spread.device_map().at("lm_head"), "cpu");

  ASSERT_EQ(spread.devices_size(), 3);
  uint64_t weights = 0;
  for (const v1::DeviceInfo& device : spread.devices()) {
    weights += device.weights_bytes();
    EXPECT_LE(device.weights_bytes() + device.reserved_bytes(), device.total_bytes())
        << device.name();
  }
  EXPECT_EQ(spread.devices(0).name(), "cuda:0");
  EXPECT_EQ(spread.devices(0).total_bytes(), 9u << 19);
  EXPECT_GT(spread.devices(0).weights_bytes(), 0u);
  EXPECT_GT(spread.devices(1).weights_bytes(), 0u);
  EXPECT_GT(spread.devices(2).weights_bytes(), 0u);
  uint64_t checkpoint_bytes = fs::file_size(dir_ / "model.safetensors");
  EXPECT_LT(weights, checkpoint_bytes);  // the header is not weights
  EXPECT_GT(weights, checkpoint_bytes - 64 * 1024);

  // The same prompt gives the same logits whatever the device map.
  const auto [single_logits, single] = ServeAndForward(dir_, {});
  EXPECT_EQ(single.device_map().at(""), "cpu");
  EXPECT_EQ(spread_logits, single_logits);
}

TEST_F(ModelLoading, AModelOverTwoVirtualGpusCpuAndDiskAnswersLikeOneDevice) {
  WriteTinyPreset();
  const std::string offload = (dir_ / "offload").string();
  const auto [spread_logits, spread] = ServeAndForward(
      dir_, {"--devices", "cuda:0=4.5MiB,cuda:1=1.5MiB,cpu=2.5MiB", "--offload-dir", offload,
             "--max-seq-len", "64", "--max-batch-size", "1"});
  std::set<std::string> used;
  for (const auto& [module, device] : spread.device_map()) used.insert(device);
  EXPECT_EQ(used, (std::set<std::string>{"0", "1", "cpu", "disk"}));
  const auto [single_logits, single] = ServeAndForward(dir_, {});
  EXPECT_EQ(spread_logits, single_logits);
  const auto [no_prefetch_logits, no_prefetch] = ServeAndForward(
      dir_, {"--devices", "cuda:0=4.5MiB,cuda:1=1.5MiB,cpu=2.5MiB", "--offload-dir", offload,
             "--max-seq-len", "64", "--max-batch-size", "1", "--no-prefetch"});
  EXPECT_EQ(no_prefetch_logits, single_logits);
}

// --offload-exec auto on a cuda:0 too small for two staging slots of the largest offloaded
// block (the 1 MiB embedding / head): one slot; too small for one: the offloaded blocks run on
// the cpu. Each answers like one device, and GetModelInfo and the log say the choice.
TEST_F(ModelLoading, AGpuTooSmallForTwoStagingSlotsDegradesToOneSlotThenTheCpu) {
  WriteTinyPreset();
  const auto [single_logits, single] = ServeAndForward(dir_, {});
  struct Case {
    std::string devices, mode, device;
    uint32_t slots;
  };
  for (const Case& c : {Case{"cuda:0=2MiB,cpu=2MiB", "staged_one_slot", "cuda:0", 1},
                        Case{"cuda:0=1MiB,cpu=8MiB", "cpu", "cpu", 0}}) {
    SCOPED_TRACE(c.devices);
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(
        ports, {"--model", dir_.string(), "--devices", c.devices, "--offload-dir",
                (dir_ / "offload").string(), "--max-seq-len", "64", "--max-batch-size", "1"}));
    ASSERT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();
    client::PlacerClient client({ports.target(), seconds(5)});
    v1::ForwardRequest forward;
    for (int token : {4, 8, 15, 16, 23, 42}) forward.add_token_ids(token);
    forward.set_all_positions(true);
    auto logits = client.Forward(forward);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(logits->logits().data(), single_logits) << "the single-device logits";
    auto info = client.GetModelInfo();
    ASSERT_TRUE(info.ok()) << info.status();
    const v1::OffloadExecution& execution = info->offload_execution();
    EXPECT_EQ(execution.mode(), c.mode);
    EXPECT_EQ(execution.device(), c.device);
    EXPECT_EQ(execution.staging_slots(), c.slots);
    EXPECT_GT(execution.blocks_size(), 0);
    EXPECT_NE(execution.reason().find("not staged onto cuda:0 through two slots"),
              std::string::npos) << execution.reason();
    EXPECT_NE(daemon.Log().find("offload execution: " + c.mode), std::string::npos)
        << daemon.Log();
  }
  EXPECT_EQ(single.offload_execution().blocks_size(), 0) << "nothing offloaded on one device";
}

TEST_F(ModelLoading, ModelThatDoesNotFitIsRefusedSayingByHowMuch) {
  WriteTinyPreset();
  DaemonProcess daemon(DaemonArgs(PickPorts(), {"--model", dir_.string(), "--devices",
                                                "cpu=2MiB", "--max-seq-len", "64"}));
  const std::optional<int> code = daemon.WaitExit(seconds(30));
  ASSERT_TRUE(code.has_value()) << daemon.Log();
  EXPECT_EQ(*code, 1) << daemon.Log();
  EXPECT_NE(daemon.Log().find("does not fit"), std::string::npos) << daemon.Log();
  EXPECT_NE(daemon.Log().find("short by"), std::string::npos) << daemon.Log();
}

TEST_F(ModelLoading, MissingDirectoryExitsOneNamingIt) {
  const std::string log = ExpectStartFailure();
  EXPECT_NE(log.find(dir_.string()), std::string::npos) << log;
  EXPECT_NE(log.find("cannot load model"), std::string::npos) << log;
}

TEST_F(ModelLoading, BrokenConfigExitsOneNamingTheFile) {
  WriteCheckpoint();
  std::ofstream(dir_ / "config.json") << "{\"architectures\": [\"LlamaForCausalLM\"], ";
  const std::string log = ExpectStartFailure();
  EXPECT_NE(log.find("config.json"), std::string::npos) << log;
}

TEST_F(ModelLoading, TruncatedShardExitsOneNamingTheFile) {
  WriteCheckpoint();
  const fs::path shard = dir_ / "model.safetensors";
  ASSERT_TRUE(fs::exists(shard));
  fs::resize_file(shard, fs::file_size(shard) / 2);
  const std::string log = ExpectStartFailure();
  EXPECT_NE(log.find("model.safetensors"), std::string::npos) << log;
}

TEST_F(ModelLoading, PickleOnlyCheckpointIsRefusedWithTheReason) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})";
  std::ofstream(dir_ / "pytorch_model.bin") << "not really a pickle";
  const std::string log = ExpectStartFailure();
  EXPECT_NE(log.find("pickle"), std::string::npos) << log;
}

}  // namespace
}  // namespace placer::testing
