// placerd --model on real checkpoints written by placer-make-checkpoint: a good one is indexed
// and described; a bad one ends the process with exit code 1 and a line naming the problem.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

TEST_F(ModelLoading, IndexedCheckpointIsDescribedButNotServed) {
  WriteCheckpoint();
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string()}));
  client::PlacerClient client({ports.target(), seconds(5)});
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto info = client.GetModelInfo();
        return info.ok() && info->state() == "indexed";
      },
      seconds(30)))
      << daemon.Log();

  const CommandResult json = RunCommand(std::string(PLACER_CLI_PATH) + " --target " +
                                        ports.target() + " info --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json info = nlohmann::json::parse(json.output);
  EXPECT_EQ(info.at("architecture"), "LlamaForCausalLM");
  EXPECT_EQ(info.at("dtype"), "F32");
  EXPECT_EQ(info.at("model_path"), dir_.string());
  // Llama with untied lm_head: embeddings + lm_head + final norm + per layer q,k,v,o, MLP, norms.
  const int64_t hidden = 64, kv_dim = 2 * (64 / 4), intermediate = 128, vocab = 300, layers = 2;
  const int64_t per_layer = 2 * hidden * hidden + 2 * hidden * kv_dim +
                            3 * hidden * intermediate + 2 * hidden;
  const int64_t expected = 2 * vocab * hidden + hidden + layers * per_layer;
  EXPECT_EQ(std::stoll(info.at("parameter_count").get<std::string>()), expected);

  // Nothing can run it yet: health stays NOT_SERVING and generation says why.
  EXPECT_EQ(client.CheckHealth().value(), client::Health::kNotServing);
  v1::ForwardRequest forward;
  forward.add_token_ids(1);
  auto forwarded = client.Forward(forward);
  EXPECT_EQ(forwarded.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(forwarded.status().message().find("indexed"), absl::string_view::npos);

  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.WaitExit(seconds(20)), 0) << daemon.Log();
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
