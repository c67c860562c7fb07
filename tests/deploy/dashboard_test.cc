// deploy/grafana/placer-dashboard.json is a dashboard Grafana can import, and every metric its
// queries read is one a real placerd exports (checked against a scrape of placerd serving a
// model spread over virtual GPUs, CPU and disk, after requests of every kind).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "client/placer_client.h"
#include "tests/deploy/promql_names.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"
#include "tests/e2e/spread_model.h"

namespace placer::testing {
namespace {

using std::chrono::seconds;

nlohmann::json LoadDashboard() {
  std::ifstream in(std::string(PLACER_SOURCE_DIR) + "/deploy/grafana/placer-dashboard.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST(PromQLNames, FindsSelectorsOnly) {
  EXPECT_EQ(MetricNamesInPromQL(
                R"(histogram_quantile(0.99, sum by (le, rpc) (rate(placer_request_duration_seconds_bucket{job=~"$job", rpc!="x"}[$__rate_interval]))))"),
            std::set<std::string>{"placer_request_duration_seconds_bucket"});
  EXPECT_EQ(MetricNamesInPromQL(R"(a_total / on (instance) group_left b offset 5m > bool 1e3)"),
            (std::set<std::string>{"a_total", "b"}));
  EXPECT_EQ(MetricNamesInPromQL(R"(sum without (kind) (x{kind="weights"}) or vector(0))"),
            std::set<std::string>{"x"});
  EXPECT_EQ(MetricNamesInPromQL(R"q(label_replace(up, "a", "$1", "b", "(.*)"))q"),
            std::set<std::string>{"up"});
}

TEST(Dashboard, IsAValidGrafanaDashboard) {
  const nlohmann::json dashboard = LoadDashboard();
  ASSERT_TRUE(dashboard.is_object()) << "not JSON";
  EXPECT_FALSE(dashboard.value("title", "").empty());
  EXPECT_FALSE(dashboard.value("uid", "").empty());
  EXPECT_GE(dashboard.value("schemaVersion", 0), 36);
  ASSERT_TRUE(dashboard.contains("panels") && dashboard.at("panels").is_array());
  ASSERT_FALSE(dashboard.at("panels").empty());

  std::set<std::string> variables;
  bool datasource_variable = false;
  for (const nlohmann::json& variable : dashboard.at("templating").at("list")) {
    variables.insert(variable.at("name").get<std::string>());
    if (variable.at("type") == "datasource") {
      datasource_variable = variable.at("query") == "prometheus";
    }
  }
  EXPECT_TRUE(datasource_variable) << "needs a Prometheus datasource variable";

  std::set<int> ids;
  struct Box {
    int x, y, w, h;
    std::string title;
  };
  std::vector<Box> boxes;
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    const std::string title = panel.value("title", "");
    SCOPED_TRACE(title);
    EXPECT_FALSE(title.empty());
    ASSERT_TRUE(panel.contains("id") && panel.at("id").is_number_integer());
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "duplicate panel id";
    const std::string type = panel.value("type", "");
    EXPECT_TRUE((std::set<std::string>{"row", "timeseries", "stat", "gauge", "bargauge", "table"})
                    .count(type))
        << type;
    const nlohmann::json& grid = panel.at("gridPos");
    Box box{grid.at("x"), grid.at("y"), grid.at("w"), grid.at("h"), title};
    EXPECT_GE(box.x, 0);
    EXPECT_LE(box.x + box.w, 24) << "wider than Grafana's 24 columns";
    EXPECT_GT(box.h, 0);
    for (const Box& other : boxes) {
      const bool overlap = box.x < other.x + other.w && other.x < box.x + box.w &&
                           box.y < other.y + other.h && other.y < box.y + box.h;
      EXPECT_FALSE(overlap) << "overlaps " << other.title;
    }
    boxes.push_back(box);
    if (type == "row") continue;
    EXPECT_EQ(panel.at("datasource").at("uid"), "${datasource}");
    ASSERT_TRUE(panel.contains("targets") && !panel.at("targets").empty());
    std::set<std::string> ref_ids;
    for (const nlohmann::json& target : panel.at("targets")) {
      EXPECT_FALSE(target.value("expr", "").empty());
      EXPECT_TRUE(ref_ids.insert(target.value("refId", "")).second) << "duplicate refId";
    }
    if (panel.contains("repeat")) {
      EXPECT_TRUE(variables.count(panel.at("repeat"))) << "repeat";
    }
  }
}

TEST(Dashboard, EveryMetricItQueriesIsOnePlacerdExports) {
  const nlohmann::json dashboard = LoadDashboard();
  ASSERT_TRUE(dashboard.is_object());
  SpreadModel model("dashboard");
  ASSERT_TRUE(model.ok()) << model.error();
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, model.DaemonFlags()));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(30)});
  ASSERT_TRUE(client.GetModelInfo().ok());
  v1::GenerateRequest generate;
  generate.add_prompt_token_ids(1);
  generate.mutable_params()->set_max_new_tokens(3);
  ASSERT_TRUE(client.Generate(generate, [](const v1::GenerateResponse&) {}).ok());
  v1::ForwardRequest forward;
  forward.add_token_ids(1);
  ASSERT_TRUE(client.Forward(forward).ok());

  const std::optional<std::string> body = HttpGet(ports.metrics_port, "/metrics");
  ASSERT_TRUE(body.has_value()) << daemon.Log();
  std::string error;
  const std::optional<Exposition> scrape = ParseExposition(*body, &error);
  ASSERT_TRUE(scrape.has_value()) << error;
  // Exported: a sample in the scrape, or a declared family that has no series yet (offload
  // transfers appear once weights move).
  std::set<std::string> exported = scrape->sample_names;
  for (const auto& [family, type] : scrape->types) {
    if (type == "counter" || type == "gauge") exported.insert(family);
  }

  std::set<std::string> used;
  for (const std::string& query : DashboardQueries(dashboard)) {
    const std::set<std::string> names = MetricNamesInPromQL(query);
    EXPECT_FALSE(names.empty()) << query;
    for (const std::string& name : names) {
      EXPECT_TRUE(exported.count(name)) << name << " (in " << query << ") is not exported";
      used.insert(name);
    }
  }
  // What the operator must see (issue 8): memory by kind against total, KV blocks, offload
  // traffic and wait, tokens/s, latency quantiles, queue and running, requests by status.
  for (const char* name :
       {"placer_device_memory_used_bytes", "placer_device_memory_total_bytes",
        "placer_device_kv_cache_blocks", "placer_offload_transferred_bytes_total",
        "placer_offload_wait_seconds_total", "placer_generated_tokens_total",
        "placer_time_to_first_token_seconds_bucket", "placer_inter_token_latency_seconds_bucket",
        "placer_queue_depth", "placer_running_sequences", "placer_requests_total"}) {
    EXPECT_TRUE(used.count(name)) << "the dashboard does not chart " << name;
  }
}

}  // namespace
}  // namespace placer::testing
