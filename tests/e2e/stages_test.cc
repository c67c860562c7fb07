// A model spread over several placerd processes on loopback (pipeline stages over
// torch.distributed): the leader's answers equal one process's, concurrent streams equal
// each alone, a worker killed or stopped mid-stream fails the stream with UNAVAILABLE naming
// the stage within the timeout and the leader exits non-zero, and ranks that disagree are
// refused at rendezvous naming the difference.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "tests/e2e/exposition.h"
#include "tests/e2e/stage_group.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Each rank's devices: a virtual GPU and host memory, as a small node would have.
const std::vector<std::string> kNodeFlags = {"--devices", "cuda:0=256MiB,cpu=2GiB", "--threads",
                                             "2", "--max-seq-len", "512"};

v1::GenerateRequest Prompt(std::vector<int32_t> ids, uint32_t max_new_tokens) {
  v1::GenerateRequest request;
  for (int32_t id : ids) request.add_prompt_token_ids(id);
  request.mutable_params()->set_max_new_tokens(max_new_tokens);
  request.mutable_params()->set_ignore_eos(true);
  return request;
}

v1::GenerateRequest Seeded(std::vector<int32_t> ids, uint32_t max_new_tokens, uint64_t seed) {
  v1::GenerateRequest request = Prompt(std::move(ids), max_new_tokens);
  request.mutable_params()->set_temperature(1.2f);
  request.mutable_params()->set_top_p(0.95f);
  request.mutable_params()->set_seed(seed);
  return request;
}

class Stages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("placer-stages-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_->string() + " --arch llama --preset tiny --seed 5");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    single_ports_ = new StartedDaemon(PickPorts());
    std::vector<std::string> flags = {"--model", dir_->string()};
    flags.insert(flags.end(), kNodeFlags.begin(), kNodeFlags.end());
    single_ = new DaemonProcess(DaemonArgs(*single_ports_, flags));
    ASSERT_TRUE(WaitServing(*single_ports_, seconds(90))) << single_->Log();
  }
  static void TearDownTestSuite() {
    delete single_;
    delete single_ports_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static std::vector<std::string> GroupFlags(const std::string& timeout = "3s") {
    std::vector<std::string> flags = kNodeFlags;
    flags.insert(flags.end(), {"--stage-timeout", timeout, "--rendezvous-timeout", "60s"});
    return flags;
  }

  // The leader answers as one process does: logits of every position, greedy and seeded
  // tokens.
  static void ExpectSameAnswers(const StartedDaemon& leader) {
    const std::vector<int32_t> prompt = {1, 17, 300, 5, 1999, 42, 42, 7};
    const std::vector<float> expected = ForwardLogits(*single_ports_, prompt);
    const std::vector<float> got = ForwardLogits(leader, prompt);
    ASSERT_FALSE(expected.empty());
    ASSERT_EQ(got.size(), expected.size());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - expected[i]));
    EXPECT_LE(worst, 1e-5f);

    const Streamed greedy_single = GenerateStream(*single_ports_, Prompt(prompt, 24));
    const Streamed greedy = GenerateStream(leader, Prompt(prompt, 24));
    ASSERT_TRUE(greedy.status.ok()) << greedy.status.error_message();
    EXPECT_EQ(greedy.tokens.size(), 24u);
    EXPECT_EQ(greedy.tokens, greedy_single.tokens);

    const Streamed seeded_single = GenerateStream(*single_ports_, Seeded(prompt, 24, 77));
    const Streamed seeded = GenerateStream(leader, Seeded(prompt, 24, 77));
    ASSERT_TRUE(seeded.status.ok()) << seeded.status.error_message();
    EXPECT_EQ(seeded.tokens, seeded_single.tokens);
  }

  static fs::path* dir_;
  static StartedDaemon* single_ports_;
  static DaemonProcess* single_;
};

fs::path* Stages::dir_ = nullptr;
StartedDaemon* Stages::single_ports_ = nullptr;
DaemonProcess* Stages::single_ = nullptr;

TEST_F(Stages, TwoStagesGiveTheSingleProcessAnswers) {
  StageGroup group(dir_->string(), 2, GroupFlags());
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  ExpectSameAnswers(group.leader());

  // The group's device map names each module's node.
  client::PlacerClient client({group.leader().target(), seconds(10)});
  auto info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->device_map().at("model.embed_tokens"), "node0:cuda:0");
  EXPECT_EQ(info->device_map().at("model.layers.3"), "node1:cuda:0");
  EXPECT_EQ(info->device_map().at("lm_head"), "node0:cuda:0");

  // The leader's metrics: every stage's memory by node, the bytes sent, the time waited.
  const std::optional<std::string> scrape = HttpGet(group.leader().metrics_port, "/metrics");
  ASSERT_TRUE(scrape.has_value());
  EXPECT_NE(scrape->find("placer_stages 2"), std::string::npos) << *scrape;
  EXPECT_NE(scrape->find("placer_stage_device_memory_planned_bytes{node=\"node1\",device=\"cuda:0\",kind=\"weights\"}"),
            std::string::npos) << *scrape;
  auto value_of = [&](const std::string& name) {
    const size_t at = scrape->find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(scrape->substr(at + name.size() + 2));
  };
  // Every step sent at least its hidden states: 128 floats per row.
  EXPECT_GT(value_of("placer_stage_sent_bytes_total"), 3 * 8 * 128 * 4.0);
  EXPECT_GT(value_of("placer_stage_wait_seconds_total"), 0.0);
}

// Every stage's live memory on the leader's /metrics (label node), as each stage's own
// accounting has it: the worker's figures equal what its own /metrics says, the leader's
// its single-process families'. Real Prometheus text scraped over HTTP and parsed.
TEST_F(Stages, LeaderMetricsCarryEveryStagesLiveMemory) {
  StageGroup group(dir_->string(), 2, GroupFlags());
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  ASSERT_TRUE(GenerateStream(group.leader(), Prompt({1, 2, 3}, 8)).status.ok());
  auto scrape = [](int port) {
    const std::optional<std::string> text = HttpGet(port, "/metrics");
    EXPECT_TRUE(text.has_value());
    std::string error;
    std::optional<Exposition> parsed = ParseExposition(text.value_or(""), &error);
    EXPECT_TRUE(parsed.has_value()) << error;
    return parsed.value_or(Exposition{});
  };
  const Exposition worker = scrape(group.rank(1).ports.metrics_port);
  Exposition leader;
  // The worker republishes every second: wait until the leader has its figures.
  ASSERT_TRUE(WaitUntil([&] {
    leader = scrape(group.leader().metrics_port);
    return !leader.Find("placer_stage_device_memory_used_bytes", {{"node", "node1"}}).empty();
  }, seconds(10))) << group.Logs();
  EXPECT_EQ(leader.types.at("placer_stage_device_memory_used_bytes"), "gauge");
  for (const char* kind : {"weights", "kv_cache", "staging"}) {
    for (const char* device : {"cuda:0", "cpu"}) {
      const std::optional<double> own =
          worker.Value("placer_device_memory_used_bytes", {{"device", device}, {"kind", kind}});
      const std::optional<double> seen = leader.Value(
          "placer_stage_device_memory_used_bytes", {{"node", "node1"}, {"device", device}, {"kind", kind}});
      ASSERT_TRUE(own.has_value() && seen.has_value()) << device << " " << kind;
      EXPECT_EQ(*seen, *own) << "node1 " << device << " " << kind;
      const std::optional<double> leader_own =
          leader.Value("placer_device_memory_used_bytes", {{"device", device}, {"kind", kind}});
      const std::optional<double> leader_seen = leader.Value(
          "placer_stage_device_memory_used_bytes", {{"node", "node0"}, {"device", device}, {"kind", kind}});
      ASSERT_TRUE(leader_own.has_value() && leader_seen.has_value()) << device << " " << kind;
      EXPECT_EQ(*leader_seen, *leader_own) << "node0 " << device << " " << kind;
    }
  }
  // The worker holds its two layers' weights and their KV pool on its GPU.
  EXPECT_GT(*worker.Value("placer_device_memory_used_bytes", {{"device", "cuda:0"}, {"kind", "weights"}}), 0);
  EXPECT_GT(*worker.Value("placer_device_memory_used_bytes", {{"device", "cuda:0"}, {"kind", "kv_cache"}}), 0);
  // Its own /metrics is that node's: no stage families, which are the leader's.
  EXPECT_TRUE(worker.Find("placer_stage_device_memory_used_bytes").empty());
}

// The workers' pools take no KV blocks (the leader's block tables come with each step), yet
// each worker's own /metrics reports the leader's blocks in use: every message carries the
// figure and the middle stage passes it on; heartbeats bring the zero after the stream.
TEST_F(Stages, WorkersReportTheLeadersKvBlocksInUse) {
  StageGroup group(dir_->string(), 3, GroupFlags());
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  auto used_on = [&](int rank, const char* state = "used") {
    return ScrapeValue(group.rank(rank).ports.metrics_port, "placer_device_kv_cache_blocks",
                       {{"device", "cuda:0"}, {"state", state}})
        .value_or(-1.0);
  };
  const double total = used_on(0, "free");
  ASSERT_GT(total, 0);
  for (int rank : {1, 2}) EXPECT_EQ(used_on(rank, "free"), total) << "the same pool everywhere";
  std::future<Streamed> stream = std::async(std::launch::async, [&] {
    return GenerateStream(group.leader(), Prompt({1, 2, 3, 4, 5, 6, 7, 8}, 500));
  });
  // The sequence holds its blocks for the whole stream: scrape until every worker said it.
  std::set<int> agreed;
  double leader_used = 0;
  while (stream.wait_for(milliseconds(5)) != std::future_status::ready) {
    leader_used = std::max(leader_used, used_on(0));
    for (int rank : {1, 2}) {
      const double used = used_on(rank);
      if (used > 0 && used == used_on(0)) agreed.insert(rank);
      EXPECT_LE(used + used_on(rank, "free"), total) << "rank " << rank;
    }
  }
  ASSERT_TRUE(stream.get().status.ok());
  EXPECT_GT(leader_used, 0);
  EXPECT_EQ(agreed, (std::set<int>{1, 2}))
      << "each worker's placer_device_kv_cache_blocks{state=\"used\"} equals the leader's mid-stream";
  EXPECT_TRUE(WaitUntil([&] { return used_on(0) == 0 && used_on(1) == 0 && used_on(2) == 0; },
                        seconds(10)))
      << "the stream ended: no blocks in use anywhere (" << used_on(1) << ", " << used_on(2) << ")";
  EXPECT_EQ(used_on(2, "free"), total);
}

TEST_F(Stages, ThreeStagesGiveTheSingleProcessAnswers) {
  StageGroup group(dir_->string(), 3, GroupFlags());
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  ExpectSameAnswers(group.leader());
  client::PlacerClient client({group.leader().target(), seconds(10)});
  auto info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  std::set<std::string> nodes;
  for (const auto& [module, device] : info->device_map()) nodes.insert(device.substr(0, 5));
  EXPECT_EQ(nodes, (std::set<std::string>{"node0", "node1", "node2"}));
}

TEST_F(Stages, EightConcurrentStreamsEqualEachAlone) {
  StageGroup group(dir_->string(), 2, GroupFlags());
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  std::vector<v1::GenerateRequest> requests;
  std::vector<Streamed> alone;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(i % 2 == 0 ? Prompt({1, 10 + i, 20 * i + 3}, 20 + i)
                                  : Seeded({1, 500 + i, 9, 9, i}, 16 + i, 1000 + i));
    alone.push_back(GenerateStream(*single_ports_, requests.back()));
    ASSERT_TRUE(alone.back().status.ok());
  }
  std::vector<std::future<Streamed>> together;
  for (const v1::GenerateRequest& request : requests) {
    together.push_back(std::async(std::launch::async,
                                  [&, request] { return GenerateStream(group.leader(), request); }));
  }
  for (size_t i = 0; i < together.size(); ++i) {
    const Streamed streamed = together[i].get();
    ASSERT_TRUE(streamed.status.ok()) << i << ": " << streamed.status.error_message();
    EXPECT_EQ(streamed.tokens, alone[i].tokens) << "stream " << i;
  }
}

// A worker that dies (kill -9) or hangs (SIGSTOP) mid-stream.
class StageFaults : public Stages, public ::testing::WithParamInterface<int> {};

TEST_P(StageFaults, FailTheStreamWithUnavailableAndTheLeaderExits) {
  const int signal_number = GetParam();
  StageGroup group(dir_->string(), 2, GroupFlags("2s"));
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  const pid_t worker = group.rank(1).process->pid();
  std::chrono::steady_clock::time_point signalled;
  const Streamed streamed = GenerateStream(group.leader(), Prompt({1, 2, 3}, 500), [&] {
    signalled = std::chrono::steady_clock::now();
    kill(worker, signal_number);
  });
  const auto failed_after = std::chrono::steady_clock::now() - signalled;
  EXPECT_EQ(streamed.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << streamed.status.error_message() << "\n" << group.Logs();
  EXPECT_NE(streamed.status.error_message().find("stage 1"), std::string::npos)
      << streamed.status.error_message();
  EXPECT_LT(streamed.tokens.size(), 500u);
  // Within the stage timeout (2s) and a little slack, never Gloo's 30 minutes.
  EXPECT_LT(failed_after, seconds(5));
  const std::optional<int> leader_exit = group.rank(0).process->WaitExit(seconds(10));
  ASSERT_TRUE(leader_exit.has_value()) << "the leader did not exit\n" << group.Logs();
  EXPECT_NE(*leader_exit, 0);
  if (signal_number == SIGSTOP) {
    kill(worker, SIGCONT);
    // Woken, the worker finds its leader gone and exits on its own.
    const std::optional<int> worker_exit = group.rank(1).process->WaitExit(seconds(10));
    ASSERT_TRUE(worker_exit.has_value()) << group.Logs();
    EXPECT_NE(*worker_exit, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Signals, StageFaults, ::testing::Values(SIGKILL, SIGSTOP),
                         [](const auto& info) { return info.param == SIGKILL ? "Kill" : "Stop"; });

TEST_F(Stages, AWorkerExitsWhenItsLeaderDies) {
  StageGroup group(dir_->string(), 2, GroupFlags("2s"));
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  kill(group.rank(0).process->pid(), SIGKILL);
  const std::optional<int> worker_exit = group.rank(1).process->WaitExit(seconds(10));
  ASSERT_TRUE(worker_exit.has_value()) << group.Logs();
  EXPECT_NE(*worker_exit, 0);
  EXPECT_NE(group.rank(1).process->Log().find("stage 0"), std::string::npos) << group.Logs();
}

TEST_F(Stages, SigtermDrainsTheLeaderAndEndsTheGroup) {
  StageGroup group(dir_->string(), 2, GroupFlags("2s"));
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  // Scrapes all through the exit: the stage figures are read at scrape time, so the leader's
  // group must outlive the metrics endpoint.
  std::atomic<bool> exited{false};
  std::atomic<int> scrapes{0};
  std::thread scraping([&] {
    while (!exited) {
      if (HttpGet(group.leader().metrics_port, "/metrics").has_value()) ++scrapes;
    }
  });
  for (int waited = 0; waited < 1000 && scrapes < 3; ++waited) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GE(scrapes, 3) << "the leader's /metrics did not answer";
  group.rank(0).process->Signal(SIGTERM);
  const std::optional<int> leader_exit = group.rank(0).process->WaitExit(seconds(15));
  exited = true;
  scraping.join();
  ASSERT_TRUE(leader_exit.has_value()) << "the leader hung on exit\n" << group.Logs();
  EXPECT_EQ(*leader_exit, 0) << group.Logs();
  const std::optional<int> worker_exit = group.rank(1).process->WaitExit(seconds(10));
  ASSERT_TRUE(worker_exit.has_value()) << group.Logs();
  EXPECT_NE(*worker_exit, 0);
}

TEST_F(Stages, RanksThatDisagreeAreRefusedNamingTheDifference) {
  StageGroup group(dir_->string(), 2, GroupFlags(), [](int rank) {
    return rank == 1 ? std::vector<std::string>{"--dtype", "BF16"} : std::vector<std::string>{};
  });
  const std::optional<int> leader_exit = group.rank(0).process->WaitExit(seconds(60));
  const std::optional<int> worker_exit = group.rank(1).process->WaitExit(seconds(60));
  ASSERT_TRUE(leader_exit.has_value() && worker_exit.has_value()) << group.Logs();
  EXPECT_NE(*leader_exit, 0);
  EXPECT_NE(*worker_exit, 0);
  const std::string leader_log = group.rank(0).process->Log();
  EXPECT_NE(leader_log.find("rank 1 (stage 1) differs from the leader in --dtype"), std::string::npos)
      << leader_log;
  EXPECT_NE(group.rank(1).process->Log().find("--dtype"), std::string::npos) << group.Logs();
}

TEST_F(Stages, PlanNodesPlansEveryNodesShare) {
  const fs::path nodes = *dir_ / "nodes.json";
  std::ofstream(nodes) << R"(["cuda:0=256MiB,cpu=2GiB", "cuda:0=256MiB,cpu=2GiB"])";
  const CommandResult planned =
      RunCommand(std::string(PLACER_CLI_PATH) + " plan " + dir_->string() + " --nodes " +
                 nodes.string() + " --max-seq-len 512 --format json");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_NE(planned.output.find("\"model.layers.0\": \"node0:cuda:0\""), std::string::npos)
      << planned.output;
  EXPECT_NE(planned.output.find("\"model.layers.3\": \"node1:cuda:0\""), std::string::npos)
      << planned.output;
  EXPECT_NE(planned.output.find("\"lm_head\": \"node0:cuda:0\""), std::string::npos)
      << planned.output;

  std::ofstream(nodes) << R"(["cuda:0=256MiB"])";
  const CommandResult refused = RunCommand(std::string(PLACER_CLI_PATH) + " plan " +
                                           dir_->string() + " --nodes " + nodes.string());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("at least 2"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace placer::testing
