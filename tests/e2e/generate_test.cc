// Generate over gRPC against a real placerd: streamed tokens, finish reasons, usage, seeds,
// defaults, and INVALID_ARGUMENT / FAILED_PRECONDITION that name the field.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

struct StreamResult {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string finish_reason;
  v1::Usage usage;
  int messages = 0;
  grpc::Status status;
};

class GenerateOverGrpc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("placer-generate-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_->string() + " --arch llama --preset tiny --seed 2");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    ports_ = new StartedDaemon(PickPorts());
    daemon_ = new DaemonProcess(DaemonArgs(*ports_, {"--model", dir_->string()}));
    ASSERT_TRUE(WaitServing(*ports_, seconds(90))) << daemon_->Log();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete ports_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static StreamResult Generate(const v1::GenerateRequest& request) {
    client::PlacerClient client({ports_->target(), seconds(10)});
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    auto reader = client.placer_stub().Generate(&context, request);
    StreamResult result;
    for (v1::GenerateResponse response; reader->Read(&response);) {
      ++result.messages;
      result.tokens.insert(result.tokens.end(), response.token_ids().begin(),
                           response.token_ids().end());
      result.logprobs.insert(result.logprobs.end(), response.logprobs().begin(),
                             response.logprobs().end());
      if (!response.finish_reason().empty()) {
        result.finish_reason = response.finish_reason();
        result.usage = response.usage();
      }
    }
    result.status = reader->Finish();
    return result;
  }

  static v1::GenerateRequest Prompt(std::initializer_list<int32_t> ids, uint32_t max_new_tokens) {
    v1::GenerateRequest request;
    for (int32_t id : ids) request.add_prompt_token_ids(id);
    request.mutable_params()->set_max_new_tokens(max_new_tokens);
    request.mutable_params()->set_ignore_eos(true);
    return request;
  }

  static fs::path* dir_;
  static StartedDaemon* ports_;
  static DaemonProcess* daemon_;
};

fs::path* GenerateOverGrpc::dir_ = nullptr;
StartedDaemon* GenerateOverGrpc::ports_ = nullptr;
DaemonProcess* GenerateOverGrpc::daemon_ = nullptr;

TEST_F(GenerateOverGrpc, GreedyStreamsOneTokenPerMessageAndMatchesForward) {
  v1::GenerateRequest request = Prompt({1, 50, 60}, 5);
  request.set_return_logprobs(true);
  const StreamResult result = Generate(request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.tokens.size(), 5u);
  EXPECT_EQ(result.messages, 6);  // five tokens, then finish_reason and usage
  EXPECT_EQ(result.logprobs.size(), 5u);
  // Real log-probabilities (computed only because the request asked): below 0, above -inf.
  for (float logprob : result.logprobs) {
    EXPECT_LT(logprob, 0.0f);
    EXPECT_TRUE(std::isfinite(logprob));
  }
  EXPECT_EQ(result.finish_reason, "length");
  EXPECT_EQ(result.usage.prompt_tokens(), 3u);
  EXPECT_EQ(result.usage.completion_tokens(), 5u);

  // Greedy: each token is the argmax of Forward over everything before it.
  client::PlacerClient client({ports_->target(), seconds(10)});
  std::vector<int32_t> context = {1, 50, 60};
  for (int32_t token : result.tokens) {
    v1::ForwardRequest forward;
    for (int32_t id : context) forward.add_token_ids(id);
    auto logits = client.Forward(forward);
    ASSERT_TRUE(logits.ok()) << logits.status();
    const std::string& data = logits->logits().data();
    std::vector<float> row(data.size() / sizeof(float));
    std::memcpy(row.data(), data.data(), data.size());
    EXPECT_EQ(token, std::max_element(row.begin(), row.end()) - row.begin());
    context.push_back(token);
  }
}

TEST_F(GenerateOverGrpc, TheSameSeedGivesTheSameTokens) {
  v1::GenerateRequest request = Prompt({7, 7, 7}, 10);
  request.mutable_params()->set_temperature(1.3f);
  request.mutable_params()->set_top_p(0.9f);
  request.mutable_params()->set_seed(99);
  const StreamResult first = Generate(request);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(Generate(request).tokens, first.tokens);
}

TEST_F(GenerateOverGrpc, StopTokenIdsEndTheStreamWithStop) {
  const StreamResult greedy = Generate(Prompt({3, 4}, 6));
  ASSERT_EQ(greedy.tokens.size(), 6u);
  v1::GenerateRequest request = Prompt({3, 4}, 6);
  request.mutable_params()->add_stop_token_ids(greedy.tokens[1]);
  const StreamResult stopped = Generate(request);
  ASSERT_TRUE(stopped.status.ok());
  EXPECT_EQ(stopped.finish_reason, "stop");
  const size_t first = std::find(greedy.tokens.begin(), greedy.tokens.end(), greedy.tokens[1]) -
                       greedy.tokens.begin();
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(greedy.tokens.begin(), greedy.tokens.begin() + first));
}

TEST_F(GenerateOverGrpc, BadRequestsNameTheField) {
  struct Case {
    std::function<void(v1::GenerateRequest&)> edit;
    grpc::StatusCode code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::GenerateRequest& r) { r.clear_prompt_token_ids(); }, grpc::INVALID_ARGUMENT,
       "prompt_token_ids"},
      {[](v1::GenerateRequest& r) { r.set_prompt("hi"); }, grpc::INVALID_ARGUMENT, "both"},
      {[](v1::GenerateRequest& r) { r.add_prompt_token_ids(1 << 20); }, grpc::INVALID_ARGUMENT,
       "prompt_token_ids[3]"},
      {[](v1::GenerateRequest& r) { r.mutable_params()->set_temperature(-0.5f); },
       grpc::INVALID_ARGUMENT, "params.temperature"},
      {[](v1::GenerateRequest& r) { r.mutable_params()->set_top_p(0); }, grpc::INVALID_ARGUMENT,
       "params.top_p"},
      {[](v1::GenerateRequest& r) { r.mutable_params()->set_top_k(1 << 30); },
       grpc::INVALID_ARGUMENT, "params.top_k"},
      {[](v1::GenerateRequest& r) { r.mutable_params()->set_repetition_penalty(0); },
       grpc::INVALID_ARGUMENT, "params.repetition_penalty"},
      {[](v1::GenerateRequest& r) { r.mutable_params()->set_max_new_tokens(1 << 20); },
       grpc::INVALID_ARGUMENT, "params.max_new_tokens"},
      // Text fields: tests/e2e/text_generate_test.cc.
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = Prompt({1, 2, 3}, 4);
    c.edit(request);
    const StreamResult result = Generate(request);
    EXPECT_EQ(result.status.error_code(), c.code) << c.field << ": " << result.status.error_message();
    EXPECT_NE(result.status.error_message().find(c.field), std::string::npos)
        << c.field << ": " << result.status.error_message();
    EXPECT_TRUE(result.tokens.empty());
  }
}

TEST_F(GenerateOverGrpc, UnsetMaxNewTokensTakesTheDefault) {
  v1::GenerateRequest request = Prompt({5, 6}, 0);
  request.mutable_params()->clear_max_new_tokens();
  const StreamResult result = Generate(request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.tokens.size(), 16u);
  EXPECT_EQ(result.finish_reason, "length");
}

TEST_F(GenerateOverGrpc, TheCliStreamsTheSameTokensAsTheApi) {
  const StreamResult api = Generate(Prompt({1, 2, 3}, 6));
  ASSERT_TRUE(api.status.ok());
  // The CLI sends no ignore_eos, so compare only up to a possible eos stop.
  const CommandResult cli =
      RunCommand(std::string(PLACER_CLI_PATH) + " --target " + ports_->target() +
                 " generate 1 2 3 --max-new-tokens 6 --temperature 0");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  std::istringstream words(cli.output);
  std::vector<int32_t> printed;
  for (int32_t token; words >> token;) printed.push_back(token);
  ASSERT_FALSE(printed.empty()) << cli.output;
  EXPECT_EQ(printed, std::vector<int32_t>(api.tokens.begin(), api.tokens.begin() + printed.size()));
  EXPECT_NE(cli.output.find(" generated tokens)"), std::string::npos) << cli.output;

  const CommandResult bad = RunCommand(std::string(PLACER_CLI_PATH) + " --target " +
                                       ports_->target() + " generate 1 --temperature -1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("params.temperature"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace placer::testing

namespace placer::testing {
namespace {

// Draining with streams in flight: within --drain-timeout they finish; past it they end with
// UNAVAILABLE and a reason. Either way nothing admitted is dropped silently, and exit is 0.
class DrainWithStreams : public ::testing::TestWithParam<bool> {};

TEST_P(DrainWithStreams, AdmittedStreamsFinishOrAreToldWhy) {
  const bool long_timeout = GetParam();
  const fs::path dir = fs::temp_directory_path() /
                       ("placer-drain-" + std::to_string(getpid()) + (long_timeout ? "l" : "s"));
  fs::remove_all(dir);
  ASSERT_EQ(RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " + dir.string() +
                       " --arch llama --preset tiny --seed 3")
                .exit_code,
            0);
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(
      ports, {"--model", dir.string(), "--drain-timeout", long_timeout ? "60s" : "1ms"}));
  ASSERT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();

  client::PlacerClient client({ports.target(), seconds(60)});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(60));
  v1::GenerateRequest request;
  request.add_prompt_token_ids(1);
  request.mutable_params()->set_max_new_tokens(500);
  request.mutable_params()->set_ignore_eos(true);
  auto reader = client.placer_stub().Generate(&context, request);
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));  // admitted and running
  daemon.Signal(SIGTERM);
  size_t tokens = response.token_ids_size();
  std::string finish_reason;
  while (reader->Read(&response)) {
    tokens += response.token_ids_size();
    if (!response.finish_reason().empty()) finish_reason = response.finish_reason();
  }
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(daemon.WaitExit(seconds(30)), 0) << daemon.Log();
  // The stream really was running when draining began.
  EXPECT_NE(daemon.Log().find("draining: 1 request(s) in flight"), std::string::npos)
      << daemon.Log();
  if (long_timeout) {
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(finish_reason, "length");
    EXPECT_EQ(tokens, 500u);
  } else {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_NE(status.error_message().find("--drain-timeout"), std::string::npos)
        << status.error_message();
    EXPECT_LT(tokens, 500u);
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Timeouts, DrainWithStreams, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("WithinTimeout")
                                             : std::string("PastTimeout");
                         });

}  // namespace
}  // namespace placer::testing
