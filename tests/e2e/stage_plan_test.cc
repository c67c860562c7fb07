// The leader of a pipeline group plans over every node (placement::PlanGroup, the function
// `placer plan --nodes` runs) and sends each rank its device map, which the rank validates
// over its own devices and loads: the group's map equals what `placer plan --nodes` shows
// for the same devices, also when the nodes differ (the worker's small GPU splits its layers
// with the cpu).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "tests/e2e/stage_group.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

TEST(StagePlan, RanksLoadTheMapsPlacerPlanNodesShows) {
  const fs::path dir = fs::temp_directory_path() / ("placer-stage-plan-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                        dir.string() + " --arch llama --preset tiny --seed 41");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::vector<std::string> devices = {"cuda:0=256MiB,cpu=2GiB", "cuda:0=9MiB,cpu=2GiB"};
  const std::vector<std::string> limits = {"--max-seq-len", "256", "--max-batch-size", "2"};
  const fs::path nodes = dir / "nodes.json";
  std::ofstream(nodes) << nlohmann::json(devices).dump();
  std::string plan_command = std::string(PLACER_CLI_PATH) + " plan " + dir.string() + " --nodes " +
                             nodes.string() + " --format json";
  for (const std::string& flag : limits) plan_command += " " + flag;
  const CommandResult planned = RunCommand(plan_command + " 2>/dev/null");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  const nlohmann::json plan = nlohmann::json::parse(planned.output, nullptr, false);
  ASSERT_TRUE(plan.is_object() && plan.contains("device_map")) << planned.output;
  std::map<std::string, std::string> want = plan["device_map"].get<std::map<std::string, std::string>>();
  std::set<std::string> worker_devices;
  for (const auto& [module, device] : want) {
    if (device.rfind("node1:", 0) == 0) worker_devices.insert(device);
  }
  ASSERT_EQ(worker_devices, (std::set<std::string>{"node1:cuda:0", "node1:cpu"}))
      << "the worker's share is split, so its map says more than one device\n" << planned.output;

  StageGroup group(dir.string(), 2, {"--threads", "2", "--stage-timeout", "5s",
                                     "--rendezvous-timeout", "60s"},
                   [&](int rank) {
                     std::vector<std::string> flags = {"--devices", devices[static_cast<size_t>(rank)]};
                     flags.insert(flags.end(), limits.begin(), limits.end());
                     return flags;
                   });
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  client::PlacerClient client({group.leader().target(), seconds(10)});
  auto info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  const std::map<std::string, std::string> got(info->device_map().begin(), info->device_map().end());
  EXPECT_EQ(got, want) << group.Logs();
  EXPECT_NE(group.rank(1).process->Log().find("the leader's device map"), std::string::npos)
      << group.Logs();
  // And the group answers.
  const Streamed streamed = GenerateStream(group.leader(), [] {
    v1::GenerateRequest request;
    for (int32_t id : {1, 5, 9}) request.add_prompt_token_ids(id);
    request.mutable_params()->set_max_new_tokens(4);
    request.mutable_params()->set_ignore_eos(true);
    return request;
  }());
  EXPECT_TRUE(streamed.status.ok()) << streamed.status.error_message() << group.Logs();
  EXPECT_EQ(streamed.tokens.size(), 4u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace placer::testing
