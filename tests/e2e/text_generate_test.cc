// Text in and out of a real placerd serving a checkpoint from placer-make-checkpoint (with its
// byte-level BPE tokenizer): streamed UTF-8 deltas that add up to the decoded ids, stop strings
// across token boundaries, Tokenize, the validation errors, and the CLI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/placer_client.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode_text.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

struct TextStreamResult {
  std::vector<int32_t> tokens;
  std::vector<std::string> deltas;  // one per message
  std::string text;
  std::string finish_reason;
  v1::Usage usage;
  grpc::Status status;
};

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

class TextGenerate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("placer-text-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_->string() + " --arch llama --preset tiny --seed 5");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    auto tokenizer = tokenizer::Tokenizer::FromJson(ReadJson(*dir_ / "tokenizer.json"),
                                                    ReadJson(*dir_ / "tokenizer_config.json"));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = new std::shared_ptr<const tokenizer::Tokenizer>(*tokenizer);
    ports_ = new StartedDaemon(PickPorts());
    daemon_ = new DaemonProcess(
        DaemonArgs(*ports_, {"--model", dir_->string(), "--max-stop-sequences", "3"}));
    ASSERT_TRUE(WaitServing(*ports_, seconds(30))) << daemon_->Log();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete ports_;
    delete tokenizer_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static TextStreamResult Generate(const v1::GenerateRequest& request) {
    client::PlacerClient client({ports_->target(), seconds(30)});
    TextStreamResult result;
    result.status = grpc::Status::OK;
    const absl::Status status = client.Generate(request, [&](const v1::GenerateResponse& r) {
      result.tokens.insert(result.tokens.end(), r.token_ids().begin(), r.token_ids().end());
      result.deltas.push_back(r.text());
      result.text += r.text();
      if (!r.finish_reason().empty()) {
        result.finish_reason = r.finish_reason();
        result.usage = r.usage();
      }
    });
    if (!status.ok()) {
      result.status = grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                                   std::string(status.message()));
    }
    return result;
  }

  static v1::GenerateRequest TextPrompt(const std::string& prompt, uint32_t max_new_tokens) {
    v1::GenerateRequest request;
    request.set_prompt(prompt);
    request.mutable_params()->set_max_new_tokens(max_new_tokens);
    request.mutable_params()->set_ignore_eos(true);
    request.mutable_params()->set_temperature(0);
    return request;
  }

  static const tokenizer::Tokenizer& Tok() { return **tokenizer_; }

  static fs::path* dir_;
  static std::shared_ptr<const tokenizer::Tokenizer>* tokenizer_;
  static StartedDaemon* ports_;
  static DaemonProcess* daemon_;
};

fs::path* TextGenerate::dir_ = nullptr;
std::shared_ptr<const tokenizer::Tokenizer>* TextGenerate::tokenizer_ = nullptr;
StartedDaemon* TextGenerate::ports_ = nullptr;
DaemonProcess* TextGenerate::daemon_ = nullptr;

constexpr char kPrompt[] = "Once upon a time, the fisherman";

TEST_F(TextGenerate, StreamsUtf8DeltasThatAddUpToTheDecodedIds) {
  const TextStreamResult result = Generate(TextPrompt(kPrompt, 40));
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.finish_reason, "length");
  ASSERT_EQ(result.tokens.size(), 40u);
  EXPECT_EQ(result.deltas.size(), 41u);  // one message a token, then the summary
  for (const std::string& delta : result.deltas) EXPECT_TRUE(placer::IsValidUtf8(delta));
  EXPECT_EQ(result.text, Tok().Decode(result.tokens, /*skip_special_tokens=*/true));
  EXPECT_FALSE(result.text.empty());

  // The prompt went through the tokenizer, bos included (add_bos_token), and the same ids
  // sent as prompt_token_ids give the same tokens.
  auto prompt_ids = Tok().Encode(kPrompt, true);
  ASSERT_TRUE(prompt_ids.ok());
  EXPECT_EQ(prompt_ids->front(), 1);
  EXPECT_EQ(result.usage.prompt_tokens(), prompt_ids->size());
  v1::GenerateRequest by_ids = TextPrompt("", 40);
  for (int32_t id : *prompt_ids) by_ids.add_prompt_token_ids(id);
  const TextStreamResult same = Generate(by_ids);
  ASSERT_TRUE(same.status.ok()) << same.status.error_message();
  EXPECT_EQ(same.tokens, result.tokens);
  EXPECT_EQ(same.text, result.text);
}

TEST_F(TextGenerate, AStopStringAcrossTokensEndsTheStreamAndIsNotReturned) {
  const TextStreamResult full = Generate(TextPrompt(kPrompt, 60));
  ASSERT_TRUE(full.status.ok()) << full.status.error_message();
  // A stop string made of the last character of one token's text and the first of the next,
  // whose first occurrence in the text is exactly there: it can only be seen across tokens.
  std::string stop;
  size_t boundary = 0;
  size_t at = std::string::npos;
  size_t offset = 0;  // where deltas[i + 1] starts in the text
  for (size_t i = 0; i + 1 < full.tokens.size() && stop.empty(); ++i) {
    offset += full.deltas[i].size();
    const std::vector<std::string> left = tokenizer::SplitCodePoints(full.deltas[i]);
    const std::vector<std::string> right = tokenizer::SplitCodePoints(full.deltas[i + 1]);
    if (left.empty() || right.empty()) continue;
    const std::string candidate = left.back() + right.front();
    if (full.text.find(candidate) != offset - left.back().size()) continue;
    stop = candidate;
    boundary = i;
    at = offset - left.back().size();
  }
  ASSERT_FALSE(stop.empty()) << "no two neighbouring tokens with text in: " << full.text;

  v1::GenerateRequest request = TextPrompt(kPrompt, 60);
  request.mutable_params()->add_stop("never appears \x01");
  request.mutable_params()->add_stop(stop);
  const TextStreamResult stopped = Generate(request);
  ASSERT_TRUE(stopped.status.ok()) << stopped.status.error_message();
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.text, full.text.substr(0, at)) << "stop string: " << stop;
  EXPECT_EQ(stopped.text.find(stop), std::string::npos);
  // The ids stop with the token that completed the stop string.
  ASSERT_LE(stopped.tokens.size(), boundary + 2);
  EXPECT_EQ(stopped.tokens,
            std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + stopped.tokens.size()));
  EXPECT_EQ(stopped.usage.completion_tokens(), stopped.tokens.size());
}

TEST_F(TextGenerate, TokenizeGivesTheTokenizersIdsAndTokens) {
  client::PlacerClient client({ports_->target(), seconds(10)});
  v1::TokenizeRequest request;
  request.set_text("The fish said nothing. 日本 😀");
  auto plain = client.Tokenize(request);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto expected = Tok().Encode(request.text(), false);
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(std::vector<int32_t>(plain->token_ids().begin(), plain->token_ids().end()), *expected);
  ASSERT_EQ(plain->tokens_size(), plain->token_ids_size());
  for (int i = 0; i < plain->tokens_size(); ++i) {
    EXPECT_EQ(plain->tokens(i), Tok().TokenText(plain->token_ids(i)));
  }
  request.set_add_special_tokens(true);
  auto special = client.Tokenize(request);
  ASSERT_TRUE(special.ok()) << special.status();
  ASSERT_EQ(special->token_ids_size(), plain->token_ids_size() + 1);
  EXPECT_EQ(special->token_ids(0), 1);
  EXPECT_EQ(special->tokens(0), "<s>");
}

TEST_F(TextGenerate, BadTextRequestsNameTheField) {
  struct Case {
    std::function<void(v1::GenerateRequest&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::GenerateRequest& r) { r.add_prompt_token_ids(5); }, "both"},
      {[](v1::GenerateRequest& r) { r.clear_prompt(); }, "both empty"},
      {[](v1::GenerateRequest& r) {
         for (const char* stop : {"a", "b", "c", "d"}) r.mutable_params()->add_stop(stop);
       },
       "params.stop: 4 stop strings, at most 3"},
      {[](v1::GenerateRequest& r) {
         r.mutable_params()->add_stop("ok");
         r.mutable_params()->add_stop("fine");
         r.mutable_params()->add_stop(std::string(257, 'x'));
       },
       "params.stop[2]: 257 bytes, at most 256"},
      {[](v1::GenerateRequest& r) {
         r.mutable_params()->add_stop("ok");
         r.mutable_params()->add_stop("");
       },
       "params.stop[1]: empty"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = TextPrompt("hello", 4);
    c.edit(request);
    const TextStreamResult result = Generate(request);
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.field << ": " << result.status.error_message();
    EXPECT_NE(result.status.error_message().find(c.field), std::string::npos)
        << c.field << ": " << result.status.error_message();
    EXPECT_TRUE(result.tokens.empty());
  }
}

// Invalid UTF-8 in a proto3 string field never reaches placerd's handler: protobuf refuses to
// parse the request. Either way the client gets an error and no tokens.
TEST_F(TextGenerate, InvalidUtf8IsRefused) {
  for (const bool in_stop : {false, true}) {
    v1::GenerateRequest request = TextPrompt(in_stop ? "hello" : "bad \xC3( text", 4);
    if (in_stop) request.mutable_params()->add_stop("\xFF");
    const TextStreamResult result = Generate(request);
    EXPECT_FALSE(result.status.ok());
    EXPECT_TRUE(result.tokens.empty());
  }
}

TEST_F(TextGenerate, TheCliStreamsTextAndTokenizes) {
  const TextStreamResult api = Generate(TextPrompt(kPrompt, 12));
  ASSERT_TRUE(api.status.ok()) << api.status.error_message();
  const std::string cli = std::string(PLACER_CLI_PATH) + " --target " + ports_->target();
  const CommandResult streamed =
      RunCommand(cli + " generate '" + kPrompt +
                 "' --stream --max-new-tokens 12 --temperature 0 --ignore-eos");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
  EXPECT_EQ(streamed.output.rfind(api.text, 0), 0u) << streamed.output;
  EXPECT_NE(streamed.output.find("(length: "), std::string::npos) << streamed.output;

  const CommandResult sampled =
      RunCommand(cli + " generate hello --max-new-tokens 5 --temperature 0.8 --top-k 20 "
                       "--top-p 0.9 --repetition-penalty 1.1 --seed 7 --stop zzz --stop yyy");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.output;
  const CommandResult too_many =
      RunCommand(cli + " generate hello --stop a --stop b --stop c --stop d");
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.output.find("params.stop"), std::string::npos) << too_many.output;

  const CommandResult tokenized = RunCommand(cli + " tokenize 'the sea' --add-special-tokens");
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.output;
  auto ids = Tok().Encode("the sea", true);
  ASSERT_TRUE(ids.ok());
  std::istringstream lines(tokenized.output);
  std::vector<int32_t> printed;
  for (std::string line; std::getline(lines, line);) printed.push_back(std::stoi(line));
  EXPECT_EQ(printed, *ids) << tokenized.output;
  EXPECT_NE(tokenized.output.find("1\t\"<s>\""), std::string::npos) << tokenized.output;
}

TEST(TextWithoutTokenizer, GenerateWithTextIsAFailedPreconditionNamingTheField) {
  const fs::path dir =
      fs::temp_directory_path() / ("placer-notok-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ASSERT_EQ(RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " + dir.string() +
                       " --arch gpt2 --preset tiny --no-tokenizer")
                .exit_code,
            0);
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir.string()}));
  ASSERT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(10)});
  for (const bool stop_only : {false, true}) {
    v1::GenerateRequest request;
    if (stop_only) {
      request.add_prompt_token_ids(3);
      request.mutable_params()->add_stop("x");
    } else {
      request.set_prompt("hello");
    }
    const absl::Status status = client.Generate(request, [](const v1::GenerateResponse&) {});
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find(stop_only ? "params.stop:" : "prompt:"), std::string::npos)
        << status;
    EXPECT_NE(status.message().find("has no tokenizer.json"), std::string::npos) << status;
  }
  // Token ids still work, and their messages carry no text.
  v1::GenerateRequest ids;
  ids.add_prompt_token_ids(3);
  ids.mutable_params()->set_max_new_tokens(3);
  std::string text;
  int tokens = 0;
  const absl::Status status = client.Generate(ids, [&](const v1::GenerateResponse& r) {
    tokens += r.token_ids_size();
    text += r.text();
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_GT(tokens, 0);
  EXPECT_EQ(text, "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace placer::testing
