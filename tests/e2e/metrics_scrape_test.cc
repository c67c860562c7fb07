// Scrapes a real placerd's /metrics over HTTP and reads the Prometheus text format.
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <map>
#include <sstream>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

using std::chrono::seconds;

// Sample "name{labels}" -> value, from the exposition text; fails the test on a bad line.
std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    const std::string value = line.substr(space + 1);
    samples[line.substr(0, space)] = value == "Nan" ? std::nan("") : std::stod(value);
  }
  return samples;
}

TEST(Metrics, BuildInfoProcessAndRequestCountersAreScraped) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(5)});
  ASSERT_TRUE(client.GetModelInfo().ok());
  v1::ForwardRequest forward;
  forward.add_token_ids(3);
  ASSERT_FALSE(client.Forward(forward).ok());

  const std::optional<std::string> body = HttpGet(ports.metrics_port, "/metrics");
  ASSERT_TRUE(body.has_value()) << daemon.Log();
  const std::map<std::string, double> samples = ParseExposition(*body);

  // The commit the binary was built from: the source tree's, read at build time (a build
  // directory configured at an older commit must not name that one).
  const CommandResult head =
      RunCommand(std::string("git -C ") + PLACER_SOURCE_DIR + " rev-parse --short=12 HEAD");
  std::string commit = head.exit_code == 0 ? head.output.substr(0, head.output.find('\n')) : "unknown";
  bool build_info = false;
  for (const auto& [name, value] : samples) {
    if (name.rfind("placer_build_info{", 0) == 0) {
      build_info = true;
      EXPECT_EQ(value, 1);
      EXPECT_NE(name.find("version=\"0.1.0\""), std::string::npos) << name;
      EXPECT_NE(name.find("commit=\"" + commit + "\""), std::string::npos) << name;
    }
  }
  EXPECT_TRUE(build_info) << *body;
  EXPECT_NE(daemon.Log().find("placerd 0.1.0 (" + commit + ")"), std::string::npos) << daemon.Log();
  ASSERT_TRUE(samples.count("process_resident_memory_bytes")) << *body;
  EXPECT_GT(samples.at("process_resident_memory_bytes"), 1 << 20);
  ASSERT_TRUE(samples.count("process_start_time_seconds"));
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_NEAR(samples.at("process_start_time_seconds"), now, 120);
  EXPECT_GT(samples.at("process_open_fds"), 2);
  EXPECT_EQ(samples.at(R"(placer_requests_total{code="OK",rpc="GetModelInfo"})"), 1);
  EXPECT_EQ(samples.at(R"(placer_requests_total{code="FAILED_PRECONDITION",rpc="Forward"})"), 1);
}

TEST(Metrics, EmptyMetricsListenDisablesTheEndpoint) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon({"--listen", ports.target(), "--metrics-listen", ""});
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
  EXPECT_FALSE(HttpGet(ports.metrics_port, "/metrics").has_value());
}

}  // namespace
}  // namespace placer::testing
