// Pipeline stages over what the one-architecture tests do not reach: BF16 compute (the hidden
// states cross the wire as BF16, half the bytes), GPT-2 (learned positions, tied lm_head), a
// sliding-window model (ring KV caches on every stage, prompts longer than the ring) and
// stages whose blocks are offloaded to disk (the leader's, a worker's). Each 2-stage group
// answers as one placerd over the same checkpoint and flags: logits of every position, greedy
// and seeded tokens.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/exposition.h"
#include "tests/e2e/stage_group.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

struct StagedModel {
  std::string name;
  std::string checkpoint_args;  // placer-make-checkpoint's
  nlohmann::json config_patch;  // merged into config.json (null: none)
  std::vector<std::string> flags;  // every rank's, and the single placerd's
  // Each rank's --devices (rank order); the single placerd gets the leader's.
  std::vector<std::string> devices;
  int64_t wire_element_bytes = 4;  // of the hidden states the leader sends
  // >= 0: every process gets an --offload-dir of its own, and this rank's blocks must be
  // staged from disk onto its GPU.
  int offloaded_rank = -1;
};

// Test names and failure messages show the case, not its bytes.
void PrintTo(const StagedModel& model, std::ostream* out) { *out << model.name; }

std::vector<int32_t> Tokens(int count, int salt) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back((i * 41 + salt) % 1000 + 1);
  return tokens;
}

v1::GenerateRequest Request(const std::vector<int32_t>& prompt, uint32_t max_new_tokens,
                            uint64_t seed) {
  v1::GenerateRequest request;
  for (int32_t id : prompt) request.add_prompt_token_ids(id);
  request.mutable_params()->set_max_new_tokens(max_new_tokens);
  request.mutable_params()->set_ignore_eos(true);
  if (seed != 0) {
    request.mutable_params()->set_temperature(1.2f);
    request.mutable_params()->set_top_p(0.95f);
    request.mutable_params()->set_seed(seed);
  }
  return request;
}

class StageModels : public ::testing::TestWithParam<StagedModel> {};

TEST_P(StageModels, TwoStagesGiveTheSingleProcessAnswers) {
  const StagedModel& c = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("placer-stage-" + c.name + "-" +
                                                   std::to_string(getpid()));
  fs::remove_all(dir);
  const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                        dir.string() + " " + c.checkpoint_args);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  if (!c.config_patch.is_null()) {
    nlohmann::json config;
    std::ifstream(dir / "config.json") >> config;
    config.merge_patch(c.config_patch);
    std::ofstream(dir / "config.json") << config.dump(2);
  }
  auto flags_for = [&](int rank) {
    std::vector<std::string> flags = c.flags;
    flags.insert(flags.end(), {"--devices", c.devices[static_cast<size_t>(rank)]});
    if (c.offloaded_rank >= 0) {
      flags.insert(flags.end(), {"--offload-dir", (dir / ("offload" + std::to_string(rank))).string()});
    }
    return flags;
  };
  const StartedDaemon single_ports = PickPorts();
  std::vector<std::string> single_flags = {"--model", dir.string()};
  for (const std::string& flag : flags_for(0)) single_flags.push_back(flag);
  if (c.offloaded_rank >= 0) single_flags.back() = (dir / "offload-single").string();
  DaemonProcess single(DaemonArgs(single_ports, single_flags));
  StageGroup group(dir.string(), 2, {"--stage-timeout", "5s", "--rendezvous-timeout", "60s"},
                   flags_for);
  ASSERT_TRUE(WaitServing(single_ports, seconds(90))) << single.Log();
  ASSERT_TRUE(group.WaitServing(seconds(90))) << group.Logs();
  if (c.offloaded_rank >= 0) {
    EXPECT_NE(group.rank(c.offloaded_rank).process->Log().find("offload execution: staged_prefetch"),
              std::string::npos) << group.Logs();
  }

  // One Forward first, alone, so the bytes it sent can be counted: header, layout, hidden.
  const std::vector<int32_t> prompt = Tokens(20, 3);  // longer than a window's ring
  const std::vector<float> expected = ForwardLogits(single_ports, prompt);
  const std::vector<float> got = ForwardLogits(group.leader(), prompt);
  ASSERT_FALSE(expected.empty()) << single.Log();
  ASSERT_EQ(got.size(), expected.size()) << group.Logs();
  float worst = 0, largest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - expected[i]));
    largest = std::max(largest, std::fabs(expected[i]));
  }
  EXPECT_LE(worst, 1e-5f * std::max(1.0f, largest)) << c.name;
  const std::optional<double> sent = ScrapeValue(group.leader().metrics_port,
                                                 "placer_stage_sent_bytes_total");
  ASSERT_TRUE(sent.has_value());
  // 7 header ints, the layout of one cacheless sequence (6 ints), 20 rows of 128 values.
  EXPECT_EQ(*sent, 13 * 8 + 20 * 128 * c.wire_element_bytes)
      << "hidden states of " << c.wire_element_bytes << " bytes a value";

  for (uint64_t seed : {uint64_t{0}, uint64_t{77}}) {
    const v1::GenerateRequest request = Request(prompt, 24, seed);
    const Streamed want = GenerateStream(single_ports, request);
    const Streamed streamed = GenerateStream(group.leader(), request);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message();
    ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message() << group.Logs();
    EXPECT_EQ(streamed.tokens.size(), 24u);
    EXPECT_EQ(streamed.tokens, want.tokens) << c.name << " seed " << seed;
  }
  fs::remove_all(dir);
}

const std::string kNode = "cuda:0=256MiB,cpu=2GiB";
const std::vector<std::string> kFlags = {"--threads", "2", "--max-seq-len", "256",
                                         "--max-batch-size", "2"};

std::vector<std::string> With(std::vector<std::string> flags, std::vector<std::string> more) {
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

INSTANTIATE_TEST_SUITE_P(
    Models, StageModels,
    ::testing::Values(
        StagedModel{"bf16", "--arch llama --preset tiny --seed 31", nullptr,
                    With(kFlags, {"--dtype", "BF16"}), {kNode, kNode}, 2},
        StagedModel{"gpt2", "--arch gpt2 --preset tiny --seed 32", nullptr, kFlags,
                    {kNode, kNode}, 4},
        // Window 8: one 16-position block per sequence on every stage, a 20-token prompt.
        StagedModel{"sliding_window", "--arch mistral --preset tiny --seed 33",
                    nlohmann::json{{"sliding_window", 8}}, kFlags, {kNode, kNode}, 4},
        // The leader's small GPU: some of its blocks stream from disk onto it (two slots,
        // prefetch), the pipeline hook on its boundary block among them.
        StagedModel{"offloaded_leader", "--arch llama --preset tiny --seed 34", nullptr,
                    {"--threads", "2", "--max-seq-len", "64", "--max-batch-size", "1"},
                    {"cuda:0=5MiB,cpu=1MiB", "cpu=2.2MiB,disk=1GiB"}, 4, 0},
        // The worker's: its three layers (of 8) stream from disk onto its GPU, so the staging
        // hooks run inside RunStage.
        StagedModel{"offloaded_worker", "--arch llama --preset tiny --layers 8 --seed 35", nullptr,
                    {"--threads", "2", "--max-seq-len", "64", "--max-batch-size", "1"},
                    {"cuda:0=7MiB,cpu=1MiB", "cuda:0=3MiB,cpu=256KiB,disk=1GiB"}, 4, 1}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace placer::testing
