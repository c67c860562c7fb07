// A real placerd on loopback, driven by the real client library and CLI: health, model RPCs
// without a model, an unreachable daemon, and draining on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "base/openblas_core.h"
#include "client/placer_client.h"
#include "server/request_gate.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

client::PlacerClient ClientFor(const StartedDaemon& ports) {
  return client::PlacerClient({ports.target(), seconds(5)});
}

std::string Cli(const StartedDaemon& ports, const std::string& args) {
  return std::string(PLACER_CLI_PATH) + " --target " + ports.target() + " " + args;
}

TEST(DaemonWithoutModel, HealthIsNotServingAndTheCliSaysSo) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();

  const CommandResult health = RunCommand(Cli(ports, "health"));
  EXPECT_EQ(health.exit_code, 1) << health.output;
  EXPECT_EQ(health.output, "NOT_SERVING\n");

  auto api_health = ClientFor(ports).CheckHealth("placer.v1.Placer");
  ASSERT_TRUE(api_health.ok()) << api_health.status();
  EXPECT_EQ(*api_health, client::Health::kNotServing);
}

TEST(DaemonWithoutModel, ModelRpcsAnswerFailedPreconditionNamingTheFlag) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
  client::PlacerClient client = ClientFor(ports);

  v1::ForwardRequest forward;
  forward.add_token_ids(1);
  auto forwarded = client.Forward(forward);
  EXPECT_EQ(forwarded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(forwarded.status().message().find("--model"), absl::string_view::npos);

  auto tokenized = client.Tokenize(v1::TokenizeRequest());
  EXPECT_EQ(tokenized.status().code(), absl::StatusCode::kFailedPrecondition);

  grpc::ClientContext context;
  v1::GenerateRequest generate;
  generate.set_prompt("hello");
  auto reader = client.placer_stub().Generate(&context, generate);
  v1::GenerateResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(DaemonWithoutModel, InfoReportsNoModelAsTextAndJson) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();

  const CommandResult text = RunCommand(Cli(ports, "info"));
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("state:        none"), std::string::npos) << text.output;

  const CommandResult json = RunCommand(Cli(ports, "info --json"));
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json info = nlohmann::json::parse(json.output);
  EXPECT_EQ(info.at("state"), "none");
  EXPECT_FALSE(info.at("server_version").get<std::string>().empty());
}

// NAME=value entries of a running process's environment.
std::vector<std::string> EnvironmentOf(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> entries;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    entries.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return entries;
}

bool Contains(const std::vector<std::string>& entries, const std::string& entry) {
  return std::find(entries.begin(), entries.end(), entry) != entries.end();
}

// Idle OpenMP and OpenBLAS threads must sleep, not spin on the cores the next step needs
// (server/thread_wait_defaults.cc); a value the user set wins.
TEST(DaemonEnvironment, ThreadPoolsSleepWhenIdleUnlessTheUserSetIt) {
  const char* saved_omp = std::getenv("OMP_WAIT_POLICY");
  const char* saved_blas = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  const std::string omp = saved_omp == nullptr ? "" : saved_omp;
  const std::string blas = saved_blas == nullptr ? "" : saved_blas;
  // The environment of a daemon started now, once it answers.
  const auto started_environment = [] {
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(ports));
    EXPECT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
    return EnvironmentOf(daemon.pid());
  };
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("OPENBLAS_THREAD_TIMEOUT");
  std::vector<std::string> environment = started_environment();
  EXPECT_TRUE(Contains(environment, "OMP_WAIT_POLICY=passive"));
  EXPECT_TRUE(Contains(environment, "OPENBLAS_THREAD_TIMEOUT=4"));
  setenv("OPENBLAS_THREAD_TIMEOUT", "28", 1);
  environment = started_environment();
  EXPECT_TRUE(Contains(environment, "OPENBLAS_THREAD_TIMEOUT=28"));
  EXPECT_FALSE(Contains(environment, "OPENBLAS_THREAD_TIMEOUT=4"));
  EXPECT_TRUE(Contains(environment, "OMP_WAIT_POLICY=passive")) << "still added";
  if (omp.empty()) unsetenv("OMP_WAIT_POLICY"); else setenv("OMP_WAIT_POLICY", omp.c_str(), 1);
  if (blas.empty()) {
    unsetenv("OPENBLAS_THREAD_TIMEOUT");
  } else {
    setenv("OPENBLAS_THREAD_TIMEOUT", blas.c_str(), 1);
  }
}

// The OpenBLAS kernel family a daemon's start log names ("OpenBLAS core Cooperlake ..."), or
// "" when it names none.
std::string LoggedOpenBlasCore(const std::string& log) {
  const std::string marker = "OpenBLAS core ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return log.substr(begin, log.find_first_of(" \n", begin) - begin);
}

// OpenBLAS picks kernels from a table of CPU models; a CPU newer than the table (Debian 12's
// 0.3.21 on an Emerald Rapids) got its SSE3 "Prescott" kernels. placerd restarts with the
// family the CPU's vector units call for (base/openblas_core.h); a value the user set wins.
TEST(DaemonEnvironment, OpenBlasRunsKernelsForTheCpusVectorUnitsUnlessTheUserChose) {
  const char* saved = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved_value = saved == nullptr ? "" : saved;
  const auto started = [](std::vector<std::string>* environment) {
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(ports));
    EXPECT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
    *environment = EnvironmentOf(daemon.pid());
    return daemon.Log();
  };
  unsetenv("OPENBLAS_CORETYPE");
  std::vector<std::string> environment;
  std::string log = started(&environment);
  const std::string core = LoggedOpenBlasCore(log);
  if (log.find("openblas") == std::string::npos) {
    EXPECT_EQ(core, "") << log;
  } else {
    ASSERT_NE(core, "") << "the start log names no OpenBLAS core:\n" << log;
    if (base::DetectCpuVectorUnits().avx2_fma) {
      EXPECT_EQ(base::BetterOpenBlasCoreType(core, base::DetectCpuVectorUnits()), "")
          << "placerd runs OpenBLAS's " << core << " kernels on a CPU with AVX2:\n" << log;
    }
    const std::string replaced_prefix = std::string(base::kReplacedOpenBlasCoreVariable) + "=";
    const bool replaced = std::any_of(environment.begin(), environment.end(),
                                      [&](const std::string& e) { return e.rfind(replaced_prefix, 0) == 0; });
    EXPECT_EQ(replaced, log.find("OPENBLAS_CORETYPE set by placer") != std::string::npos) << log;
  }
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  log = started(&environment);
  if (log.find("openblas") != std::string::npos) {
    EXPECT_EQ(LoggedOpenBlasCore(log), "Haswell") << log;
    EXPECT_NE(log.find("(OPENBLAS_CORETYPE=Haswell)"), std::string::npos) << log;
  }
  for (const std::string& entry : environment) {
    EXPECT_NE(entry.rfind(base::kReplacedOpenBlasCoreVariable, 0), 0u) << entry;
  }
  if (saved_value.empty()) {
    unsetenv("OPENBLAS_CORETYPE");
  } else {
    setenv("OPENBLAS_CORETYPE", saved_value.c_str(), 1);
  }
}

TEST(Cli, UnreachableDaemonExitsTwoWithOneLineWithinTheTimeout) {
  const int port = FreeLoopbackPort();
  const auto started = std::chrono::steady_clock::now();
  const CommandResult result = RunCommand(std::string(PLACER_CLI_PATH) + " --target 127.0.0.1:" +
                                          std::to_string(port) + " --timeout 2 health");
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("unreachable"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find('\n'), result.output.size() - 1) << result.output;
  EXPECT_LT(elapsed, seconds(4)) << "the CLI ignored --timeout";
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCommand(std::string(PLACER_CLI_PATH)).exit_code, 2);
  EXPECT_EQ(RunCommand(std::string(PLACER_CLI_PATH) + " frobnicate").exit_code, 2);
}

TEST(DaemonDrain, SigtermEndsHealthWatchesWithNotServingAndExitsZero) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--drain-timeout", "5s"}));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();

  client::PlacerClient client = ClientFor(ports);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(30));
  grpc::health::v1::HealthCheckRequest request;
  auto watch = client.health_stub().Watch(&context, request);
  grpc::health::v1::HealthCheckResponse first;
  ASSERT_TRUE(watch->Read(&first));

  daemon.Signal(SIGTERM);
  std::vector<grpc::health::v1::HealthCheckResponse::ServingStatus> seen;
  for (grpc::health::v1::HealthCheckResponse next; watch->Read(&next);) {
    seen.push_back(next.status());
  }
  watch->Finish();
  const std::optional<int> code = daemon.WaitExit(seconds(20));
  ASSERT_TRUE(code.has_value()) << "placerd did not exit after SIGTERM\n" << daemon.Log();
  EXPECT_EQ(*code, 0) << daemon.Log();
  const auto last = seen.empty() ? first.status() : seen.back();
  EXPECT_EQ(last, grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_NE(daemon.Log().find("drained"), std::string::npos) << daemon.Log();
}

// A model of 1500 tiny layers: 13,500 tensors, whose loading takes long enough (seconds here)
// to be interrupted.
TEST(DaemonDrain, SigtermWhileTheModelLoadsStopsTheLoadAndExits) {
  const std::string dir = ::testing::TempDir() + "placer-slow-load-" + std::to_string(getpid());
  ASSERT_EQ(std::system((std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " + dir +
                         " --arch llama --layers 1500 --hidden 16 --heads 2 --kv-heads 1 "
                         "--intermediate 16 --vocab 100 --no-tokenizer > /dev/null")
                            .c_str()),
            0);
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir, "--max-seq-len", "32"}));
  ASSERT_TRUE(WaitUntil([&] { return daemon.Log().find("loading model") != std::string::npos; },
                        seconds(30)))
      << daemon.Log();
  daemon.Signal(SIGTERM);
  const std::optional<int> code = daemon.WaitExit(seconds(30));
  ASSERT_TRUE(code.has_value()) << "placerd did not exit after SIGTERM\n" << daemon.Log();
  EXPECT_EQ(*code, 0) << daemon.Log();
  EXPECT_NE(daemon.Log().find("received SIGTERM while loading the model"), std::string::npos)
      << daemon.Log();
  EXPECT_EQ(daemon.Log().find("loaded " + dir), std::string::npos)
      << "the load ran to its end before placerd stopped\n" << daemon.Log();
  std::filesystem::remove_all(dir);
}

TEST(DaemonLogs, JsonFormatWritesOneObjectPerLine) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--log-format", "json"}));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
  daemon.Signal(SIGINT);
  ASSERT_EQ(daemon.WaitExit(seconds(20)), 0);
  std::istringstream lines(daemon.Log());
  int parsed = 0;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json entry = nlohmann::json::parse(line);  // throws on a broken line
    EXPECT_TRUE(entry.contains("time") && entry.contains("level") && entry.contains("msg"));
    ++parsed;
  }
  EXPECT_GE(parsed, 3);  // listening, no model, draining, drained
}

// The gate that draining relies on, with real threads.
TEST(RequestGate, RefusesAfterDrainAndWaitsForAdmittedWork) {
  server::RequestGate gate;
  auto held = std::make_unique<server::RequestGate::Ticket>(gate.TryEnter());
  ASSERT_TRUE(held->admitted());
  gate.StartDraining();
  EXPECT_FALSE(gate.TryEnter().admitted());
  EXPECT_FALSE(gate.WaitIdle(std::chrono::steady_clock::now() + milliseconds(50)));
  std::thread finisher([&] {
    std::this_thread::sleep_for(milliseconds(100));
    held.reset();
  });
  EXPECT_TRUE(gate.WaitIdle(std::chrono::steady_clock::now() + seconds(10)));
  finisher.join();
  EXPECT_EQ(gate.in_flight(), 0);
}

}  // namespace
}  // namespace placer::testing
