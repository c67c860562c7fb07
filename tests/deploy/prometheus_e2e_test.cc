// A real Prometheus (Debian's `prometheus`) scrapes a real placerd serving a model spread over
// virtual GPUs, CPU and disk, with deploy/prometheus/prometheus.yml (only the target and the
// interval rewritten). Through Prometheus's HTTP API, every device's weights equal what
// GetModelInfo reports, and every query of the Grafana dashboard evaluates.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/placer_client.h"
#include "tests/deploy/child_process.h"
#include "tests/deploy/promql_names.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/spread_model.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kDeployConfig =
    std::string(PLACER_SOURCE_DIR) + "/deploy/prometheus/prometheus.yml";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Replaces every `from` (at least one must be there) and says how many were replaced.
int ReplaceAll(std::string* text, const std::string& from, const std::string& to) {
  int count = 0;
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at + to.size())) {
    text->replace(at, from.size(), to);
    ++count;
  }
  return count;
}

std::string UrlEncode(const std::string& text) {
  std::ostringstream out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out << c;
    } else {
      out << '%' << std::uppercase << std::hex << std::setw(2) << std::setfill('0')
          << static_cast<int>(c) << std::nouppercase << std::dec;
    }
  }
  return out.str();
}

// The API's answer to an instant query; null when Prometheus refused it.
nlohmann::json Query(int port, const std::string& promql) {
  const std::optional<std::string> body = HttpGet(port, "/api/v1/query?query=" + UrlEncode(promql));
  if (!body) return nullptr;
  return nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
}

TEST(Prometheus, DeployConfigIsValid) {
  const CommandResult check = RunCommand(std::string(PROMTOOL_PATH) + " check config " + kDeployConfig);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST(Prometheus, ScrapesEveryDevicesWeightsAsGetModelInfoReportsThem) {
  SpreadModel model("prometheus");
  ASSERT_TRUE(model.ok()) << model.error();
  const StartedDaemon ports = PickPorts();
  DaemonProcess placerd(DaemonArgs(ports, model.DaemonFlags()));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << placerd.Log();
  client::PlacerClient client({ports.target(), seconds(30)});
  const auto info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->devices_size(), static_cast<int>(SpreadModel::Devices().size()));
  v1::GenerateRequest generate;
  generate.add_prompt_token_ids(1);
  generate.mutable_params()->set_max_new_tokens(4);
  ASSERT_TRUE(client.Generate(generate, [](const v1::GenerateResponse&) {}).ok());

  const fs::path work = fs::temp_directory_path() / ("placer-prometheus-" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  // Declared before prometheus, so it is removed after prometheus has stopped.
  struct RemoveOnExit {
    fs::path path;
    ~RemoveOnExit() { fs::remove_all(path); }
  } cleanup{work};
  std::string config = ReadFile(kDeployConfig);
  ASSERT_EQ(ReplaceAll(&config, R"(targets: ["127.0.0.1:9400"])",
                       R"(targets: ["127.0.0.1:)" + std::to_string(ports.metrics_port) + "\"]"),
            1)
      << "deploy/prometheus/prometheus.yml should scrape placerd's default 127.0.0.1:9400";
  ASSERT_GE(ReplaceAll(&config, "scrape_interval: 15s", "scrape_interval: 1s"), 1);
  ASSERT_EQ(ReplaceAll(&config, "scrape_timeout: 10s", "scrape_timeout: 1s"), 1);
  const std::string config_path = (work / "prometheus.yml").string();
  std::ofstream(config_path) << config;
  const CommandResult check = RunCommand(std::string(PROMTOOL_PATH) + " check config " + config_path);
  ASSERT_EQ(check.exit_code, 0) << check.output;

  const int prometheus_port = FreeLoopbackPort();
  ChildProcess prometheus({PROMETHEUS_PATH, "--config.file=" + config_path,
                           "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port),
                           "--storage.tsdb.path=" + (work / "data").string(), "--log.level=warn"});

  const std::string weights = R"(placer_device_memory_used_bytes{job="placerd", kind="weights"})";
  nlohmann::json answer;
  const bool scraped = WaitUntil(
      [&] {
        answer = Query(prometheus_port, weights);
        return answer.is_object() && answer.value("status", "") == "success" &&
               answer.at("data").at("result").size() == static_cast<size_t>(info->devices_size());
      },
      seconds(90));
  ASSERT_TRUE(scraped) << answer.dump() << "\nprometheus:\n" << prometheus.Log();

  std::map<std::string, double> scraped_weights;
  for (const nlohmann::json& series : answer.at("data").at("result")) {
    EXPECT_EQ(series.at("metric").value("service", ""), "placerd");  // the config's label
    scraped_weights[series.at("metric").at("device")] =
        std::stod(series.at("value").at(1).get<std::string>());
  }
  for (const v1::DeviceInfo& device : info->devices()) {
    ASSERT_TRUE(scraped_weights.count(device.name())) << device.name();
    EXPECT_GT(device.weights_bytes(), 0u) << device.name();
    EXPECT_EQ(scraped_weights.at(device.name()), static_cast<double>(device.weights_bytes()))
        << device.name();
  }

  const nlohmann::json targets = nlohmann::json::parse(
      HttpGet(prometheus_port, "/api/v1/targets").value_or("{}"), nullptr, false);
  ASSERT_TRUE(targets.is_object());
  ASSERT_EQ(targets.at("data").at("activeTargets").size(), 1u);
  EXPECT_EQ(targets.at("data").at("activeTargets").at(0).at("health"), "up") << targets.dump();

  // Every dashboard query is PromQL that Prometheus evaluates (with Grafana's variables filled).
  std::ifstream dashboard_file(std::string(PLACER_SOURCE_DIR) + "/deploy/grafana/placer-dashboard.json");
  const nlohmann::json dashboard = nlohmann::json::parse(dashboard_file, nullptr, false);
  ASSERT_TRUE(dashboard.is_object());
  const std::vector<std::string> queries = DashboardQueries(dashboard);
  EXPECT_GE(queries.size(), 15u);
  for (const std::string& query : queries) {
    const nlohmann::json result = Query(prometheus_port, ForPrometheus(query));
    EXPECT_TRUE(result.is_object() && result.value("status", "") == "success")
        << ForPrometheus(query) << " -> " << (result.is_null() ? "refused" : result.dump());
  }
}

}  // namespace
}  // namespace placer::testing
