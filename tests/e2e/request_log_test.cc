// placerd's logs as a log pipeline reads them: with --log-format json every line is one JSON
// object, lines written while serving a request carry its id (the client's x-request-id or a
// fresh one, sent back in the response metadata), and start-up shows the placement table and
// the load time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/spread_model.h"

namespace placer::testing {
namespace {

using std::chrono::seconds;

// Sends Forward with the given x-request-id (none when empty); returns the id placerd used.
std::string ForwardWithRequestId(client::PlacerClient& client, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(10));
  if (!id.empty()) context.AddMetadata("x-request-id", id);
  v1::ForwardRequest request;
  request.add_token_ids(1);
  request.add_token_ids(5);
  v1::ForwardResponse response;
  const grpc::Status status = client.placer_stub().Forward(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  const auto& metadata = context.GetServerInitialMetadata();
  const auto found = metadata.find("x-request-id");
  if (found == metadata.end()) return "";
  return std::string(found->second.data(), found->second.size());
}

std::vector<nlohmann::json> JsonLines(const std::string& log) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(parsed.is_object()) << "not a JSON object: " << line;
    if (parsed.is_object()) lines.push_back(std::move(parsed));
  }
  return lines;
}

TEST(RequestLog, JsonLinesCarryRequestIdsAndStartupShowsPlanAndLoadTime) {
  SpreadModel model("log");
  ASSERT_TRUE(model.ok()) << model.error();
  const StartedDaemon ports = PickPorts();
  std::vector<std::string> flags = model.DaemonFlags();
  flags.insert(flags.end(), {"--log-format", "json"});
  DaemonProcess daemon(DaemonArgs(ports, flags));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(10)});

  EXPECT_EQ(ForwardWithRequestId(client, "trace-42"), "trace-42");
  const std::string fresh = ForwardWithRequestId(client, "");
  EXPECT_EQ(fresh.size(), 16u) << fresh;
  // An id that would need escaping (or could forge log fields) is replaced.
  const std::string replaced = ForwardWithRequestId(client, "bad\"id");
  EXPECT_EQ(replaced.size(), 16u) << replaced;
  EXPECT_NE(replaced, fresh);

  std::vector<nlohmann::json> lines;
  auto line_for = [&](const std::string& id) -> const nlohmann::json* {
    for (const nlohmann::json& line : lines) {
      if (line.value("request_id", "") == id) return &line;
    }
    return nullptr;
  };
  // The request line is written as the handler returns, just after the client has its answer.
  ASSERT_TRUE(WaitUntil(
      [&] {
        lines = JsonLines(daemon.Log());
        return line_for(replaced) != nullptr;
      },
      seconds(5)))
      << daemon.Log();
  for (const std::string& id : {std::string("trace-42"), fresh, replaced}) {
    const nlohmann::json* line = line_for(id);
    ASSERT_NE(line, nullptr) << id << "\n" << daemon.Log();
    EXPECT_EQ(line->at("msg").get<std::string>().rfind("Forward OK in ", 0), 0u) << *line;
    EXPECT_EQ(line->at("level"), "info");
  }

  bool plan_table = false, load_time = false;
  for (const nlohmann::json& line : lines) {
    EXPECT_FALSE(line.contains("request_id") && line.at("msg").get<std::string>().find(
                                                    "placement plan") != std::string::npos);
    const std::string msg = line.at("msg");
    if (msg.rfind("placement plan:", 0) == 0) {
      plan_table = true;
      for (const std::string& device : SpreadModel::Devices()) {
        EXPECT_NE(msg.find(device), std::string::npos) << device << " missing in\n" << msg;
      }
    }
    if (msg.rfind("loaded " + model.dir() + " in ", 0) == 0) load_time = true;
  }
  EXPECT_TRUE(plan_table) << daemon.Log();
  EXPECT_TRUE(load_time) << daemon.Log();
}

TEST(RequestLog, TextLinesCarryTheRequestIdInBrackets) {
  SpreadModel model("textlog");
  ASSERT_TRUE(model.ok()) << model.error();
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", model.dir()}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(10)});
  EXPECT_EQ(ForwardWithRequestId(client, "req-7"), "req-7");
  EXPECT_TRUE(WaitUntil(
      [&] { return daemon.Log().find("[req-7] Forward OK in ") != std::string::npos; },
      seconds(5)))
      << daemon.Log();
}

}  // namespace
}  // namespace placer::testing
