// placerd --config (flags from a TOML file, as Kubernetes mounts a ConfigMap) and
// --health-listen (a plaintext port with the health service alone, for kubelet probes).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "client/placer_client.h"
#include "server/flags.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/spread_model.h"

namespace placer::testing {
namespace {

using std::chrono::seconds;

server::FlagParseOutcome Parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"placerd"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return server::ParseDaemonFlags(static_cast<int>(argv.size()), argv.data());
}

class ConfigFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_ = "/tmp/placerd-config-" + std::to_string(getpid()) + ".toml";
};

TEST_F(ConfigFile, FlagsComeFromTheFileAndTheCommandLineWins) {
  const std::string config = Write(
      "# as in deploy/k8s/base/placerd.toml\n"
      "listen = \"0.0.0.0:6000\"\n"
      "health-listen = \"0.0.0.0:6001\"\n"
      "drain-timeout = \"45s\"\n"
      "log-format = \"json\"\n"
      "max-memory = \"0=72GiB,cpu=24GiB\"\n"
      "max-seq-len = 4096\n");
  const server::FlagParseOutcome outcome = Parse({"--config", config, "--listen", "127.0.0.1:7000"});
  ASSERT_TRUE(outcome.options.has_value()) << outcome.message;
  EXPECT_EQ(outcome.options->listen, "127.0.0.1:7000");
  EXPECT_EQ(outcome.options->health_listen, "0.0.0.0:6001");
  EXPECT_EQ(outcome.options->drain_timeout, seconds(45));
  EXPECT_EQ(outcome.options->log_format, "json");
  EXPECT_EQ(outcome.options->placement.max_memory, "0=72GiB,cpu=24GiB");
  EXPECT_EQ(outcome.options->placement.max_seq_len, 4096);
}

TEST_F(ConfigFile, BadFilesAreRefusedNamingTheProblem) {
  struct Case {
    std::string text, mentioned;
  };
  for (const Case& bad : {Case{"no-such-flag = 1\n", "no-such-flag"},
                          Case{"drain-timeout = \"soon\"\n", "--drain-timeout"},
                          Case{"health-listen = \"nohost\"\n", "--health-listen"},
                          Case{"log-format = \"xml\"\n", "log-format"}}) {
    const server::FlagParseOutcome outcome = Parse({"--config", Write(bad.text)});
    EXPECT_FALSE(outcome.options.has_value()) << bad.text;
    EXPECT_EQ(outcome.exit_code, 2) << bad.text;
    EXPECT_NE(outcome.message.find(bad.mentioned), std::string::npos) << outcome.message;
  }
  const server::FlagParseOutcome missing = Parse({"--config", "/nonexistent/placerd.toml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.message.find("/nonexistent/placerd.toml"), std::string::npos) << missing.message;
}

TEST(HealthListen, ServesHealthAloneInPlaintextAndGoesNotServingOnDrain) {
  SpreadModel model("health");
  ASSERT_TRUE(model.ok()) << model.error();
  const StartedDaemon ports = PickPorts();
  const int health_port = FreeLoopbackPort();
  const std::string health_target = "127.0.0.1:" + std::to_string(health_port);
  DaemonProcess daemon(
      DaemonArgs(ports, {"--health-listen", health_target, "--model", model.dir()}));
  client::PlacerClient health({health_target, seconds(2)});
  // Same answers as the main port: SERVING once the model is loaded.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = health.CheckHealth("placer.v1.Placer");
        return status.ok() && *status == client::Health::kServing;
      },
      seconds(60)))
      << daemon.Log();
  EXPECT_EQ(*health.CheckHealth(""), client::Health::kServing);
  // The health port carries no API.
  const auto info = health.GetModelInfo();
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnimplemented) << info.status();

  daemon.Signal(SIGTERM);
  EXPECT_TRUE(WaitUntil(
      [&] {
        const auto status = health.CheckHealth("placer.v1.Placer");
        return !status.ok() || *status != client::Health::kServing;
      },
      seconds(10)));
  EXPECT_EQ(daemon.WaitExit(seconds(30)), 0) << daemon.Log();
}

TEST(HealthListen, TakenPortEndsPlacerdNamingTheFlag) {
  const StartedDaemon first = PickPorts();
  const int health_port = FreeLoopbackPort();
  const std::string health_target = "127.0.0.1:" + std::to_string(health_port);
  DaemonProcess holder(DaemonArgs(first, {"--health-listen", health_target}));
  ASSERT_TRUE(WaitUntil([&] { return Answers(first); }, seconds(20))) << holder.Log();
  DaemonProcess second(DaemonArgs(PickPorts(), {"--health-listen", health_target}));
  EXPECT_EQ(second.WaitExit(seconds(20)), 1) << second.Log();
  EXPECT_NE(second.Log().find("--health-listen"), std::string::npos) << second.Log();
}

}  // namespace
}  // namespace placer::testing
