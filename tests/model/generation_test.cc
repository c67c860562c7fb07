// The KV cache and generation through the engine with a batch of one: decoding token by token
// must give the logits of a full forward pass, greedy decoding must follow those logits, the
// caller's verdict ends generation as a stop or a cancel, and sampling must be reproducible.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "model/generation.h"
#include "model/generation_engine.h"
#include "model/sampler.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const CausalLm> MakeModel(const std::string& arch, const fs::path& dir) {
  fs::remove_all(dir);
  const std::string command = std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                              dir.string() + " --arch " + arch + " --preset tiny --seed 11 > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0);
  auto checkpoint = loader::Checkpoint::Open(dir.string());
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto model = LoadCausalLm(*checkpoint);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

// One request alone through the one engine: `on_token` answers continue (true) or cancel.
absl::StatusOr<FinishReason> GenerateAlone(
    const std::shared_ptr<const CausalLm>& model, const GenerationRequest& request,
    const std::function<bool(const SampledToken&)>& on_token) {
  GenerationEngine engine(model, EngineLimits{1, 256, 4});
  return engine.Generate(request, GenerationEngine::Clock::time_point::max(), nullptr,
                         [&](const SampledToken& token) {
                           return on_token(token) ? TokenVerdict::kContinue : TokenVerdict::kCancel;
                         });
}

int32_t ArgMax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

class Decoding : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("placer-gen-" + std::to_string(getpid()) + "-" + GetParam());
    model_ = MakeModel(GetParam(), dir_);
    ASSERT_NE(model_, nullptr);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::shared_ptr<const CausalLm> model_;
};

TEST_P(Decoding, TokenByTokenWithTheCacheMatchesAFullForwardPass) {
  std::vector<int32_t> tokens = {3, 141, 59, 26, 535};
  const std::vector<int32_t> continuation = {89, 79, 323, 84, 62, 643};
  auto sequence = model_->NewSequence(static_cast<int64_t>(tokens.size() + continuation.size()));
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  auto step = model_->Extend(**sequence, tokens);
  for (size_t i = 0;; ++i) {
    ASSERT_TRUE(step.ok()) << step.status();
    auto full = model_->Forward(tokens, /*all_positions=*/false);
    ASSERT_TRUE(full.ok()) << full.status();
    ASSERT_EQ(step->values.size(), full->values.size());
    for (size_t j = 0; j < full->values.size(); ++j) {
      ASSERT_NEAR(step->values[j], full->values[j], 1e-4f) << "after " << tokens.size();
    }
    EXPECT_EQ((*sequence)->length(), static_cast<int64_t>(tokens.size()));
    if (i == continuation.size()) break;
    tokens.push_back(continuation[i]);
    step = model_->Extend(**sequence, {continuation[i]});
  }
  // The cache is full: one more position is refused, not written past its end.
  EXPECT_EQ(model_->Extend(**sequence, {1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(Decoding, GreedyGenerationFollowsTheArgmaxOfFullForwardPasses) {
  GenerationRequest request;
  request.prompt = {1, 20, 300, 4000 % 2048};
  request.max_new_tokens = 8;
  request.sampling.logprobs = true;
  std::vector<SampledToken> generated;
  auto finish = GenerateAlone(model_, request, [&](const SampledToken& token) {
    generated.push_back(token);
    return true;
  });
  ASSERT_TRUE(finish.ok()) << finish.status();
  EXPECT_EQ(*finish, FinishReason::kLength);
  ASSERT_EQ(generated.size(), 8u);
  std::vector<int32_t> context = request.prompt;
  for (const SampledToken& token : generated) {
    auto logits = model_->Forward(context, false);
    ASSERT_TRUE(logits.ok());
    EXPECT_EQ(token.id, ArgMax(logits->values));
    EXPECT_LT(token.logprob, 0.0f);
    context.push_back(token.id);
  }
}

TEST_P(Decoding, StopTokensEndGenerationAndCancellationStopsIt) {
  GenerationRequest request;
  request.prompt = {5, 6, 7};
  request.max_new_tokens = 6;
  std::vector<int32_t> greedy;
  ASSERT_TRUE(GenerateAlone(model_, request, [&](const SampledToken& t) {
                greedy.push_back(t.id);
                return true;
              }).ok());
  ASSERT_EQ(greedy.size(), 6u);

  request.stop_token_ids = {greedy[2]};
  const size_t first_stop =
      std::find(greedy.begin(), greedy.end(), greedy[2]) - greedy.begin();
  std::vector<int32_t> until_stop;
  auto stopped = GenerateAlone(model_, request, [&](const SampledToken& t) {
    until_stop.push_back(t.id);
    return true;
  });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, FinishReason::kStop);
  EXPECT_EQ(until_stop, std::vector<int32_t>(greedy.begin(), greedy.begin() + first_stop));

  request.stop_token_ids.clear();
  int seen = 0;
  auto cancelled = GenerateAlone(model_, request, [&](const SampledToken&) { return ++seen < 2; });
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, FinishReason::kCancelled);
  EXPECT_EQ(seen, 2);

  // A caller that matched a stop string in the text answers kStop: a stop, not a cancel.
  GenerationEngine engine(model_, EngineLimits{1, 256, 4});
  std::vector<int32_t> until_verdict;
  auto verdict = engine.Generate(request, GenerationEngine::Clock::time_point::max(), nullptr,
                                 [&](const SampledToken& t) {
                                   until_verdict.push_back(t.id);
                                   return until_verdict.size() == 3 ? TokenVerdict::kStop
                                                                    : TokenVerdict::kContinue;
                                 });
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(*verdict, FinishReason::kStop);
  EXPECT_EQ(until_verdict, std::vector<int32_t>(greedy.begin(), greedy.begin() + 3));
}

TEST_P(Decoding, ASeedReproducesSampledTokens) {
  GenerationRequest request;
  request.prompt = {9, 8, 7};
  request.max_new_tokens = 12;
  request.sampling.temperature = 1.5f;
  request.sampling.top_p = 0.95f;
  request.sampling.seed = 1234;
  auto run = [&] {
    std::vector<int32_t> out;
    EXPECT_TRUE(GenerateAlone(model_, request, [&](const SampledToken& t) {
                  out.push_back(t.id);
                  return true;
                }).ok());
    return out;
  };
  const std::vector<int32_t> first = run();
  EXPECT_EQ(run(), first);
  request.sampling.seed = 4321;
  EXPECT_NE(run(), first) << "a different seed gave the same 12 tokens from a near-flat distribution";
}

TEST_P(Decoding, RequestsBeyondTheContextAreRefusedNamingTheField) {
  GenerationRequest request;
  request.prompt = {1, 2, 3};
  request.max_new_tokens = static_cast<uint32_t>(model_->max_positions());
  auto refused = GenerateAlone(model_, request, [](const SampledToken&) { return true; });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("max_new_tokens"), absl::string_view::npos);
}

INSTANTIATE_TEST_SUITE_P(Architectures, Decoding, ::testing::Values("llama", "gpt2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(Sampler, GreedyTopKOneAndRepetitionPenalty) {
  const std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f};
  Sampler greedy(SamplingParams{});
  EXPECT_EQ(greedy.Next(logits, {}).id, 1);
  SamplingParams top_one;
  top_one.temperature = 5;
  top_one.top_k = 1;
  top_one.seed = 7;
  Sampler narrow(top_one);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(narrow.Next(logits, {}).id, 1);
  SamplingParams penalised;
  penalised.repetition_penalty = 1.2f;
  penalised.logprobs = true;
  Sampler repeat(penalised);
  // 2.0 / 1.2 < 1.9: having seen token 1 makes token 2 the greedy choice.
  EXPECT_EQ(repeat.Next(logits, {1}).id, 2);
  // The log-probability is the model's own, before any penalty; computed only when asked.
  const SampledToken token = repeat.Next(logits, {1});
  double normalizer = 0;
  for (float logit : logits) normalizer += std::exp(logit);
  EXPECT_NEAR(token.logprob, 1.9 - std::log(normalizer), 1e-5);
  EXPECT_EQ(Sampler(SamplingParams{}).Next(logits, {}).logprob, 0.0f);
}

TEST(Sampler, OutOfRangeParametersNameTheField) {
  auto check = [](SamplingParams params, const std::string& field) {
    const absl::Status status = ValidateSamplingParams(params, 100);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(status.message().find(field), absl::string_view::npos) << status;
  };
  SamplingParams params;
  params.temperature = -1;
  check(params, "params.temperature");
  params = {};
  params.temperature = std::nanf("");
  check(params, "params.temperature");
  params = {};
  params.top_p = 1.5f;
  check(params, "params.top_p");
  params = {};
  params.top_k = 101;
  check(params, "params.top_k");
  params = {};
  params.repetition_penalty = 0;
  check(params, "params.repetition_penalty");
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}, 100).ok());
}

}  // namespace
}  // namespace placer::model
