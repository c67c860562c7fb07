// generation_config.json: what a request leaves unset comes from it, and a field of the wrong
// type or out of range is an error naming the field (it used to be ignored, or wrapped: a
// max_new_tokens of -5 became 4294967291).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "tests/loader/test_checkpoint.h"
#include "model/generation_defaults.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class GenerationDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-generation-", getpid());
    fs::remove_all(dir_);
    loader::testing::WriteTestCheckpoint(dir_.string(), loader::testing::TinySpec("llama"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<GenerationDefaults> Read(const std::string& generation_config) {
    std::ofstream(dir_ / "generation_config.json") << generation_config;
    absl::StatusOr<std::shared_ptr<loader::Checkpoint>> checkpoint =
        loader::Checkpoint::Open(dir_.string());
    if (!checkpoint.ok()) return checkpoint.status();
    return ReadGenerationDefaults(**checkpoint);
  }

  fs::path dir_;
};

TEST_F(GenerationDefaultsTest, SamplingSettingsApplyOnlyWithDoSample) {
  absl::StatusOr<GenerationDefaults> sampled = Read(
      R"({"do_sample": true, "temperature": 0.6, "top_p": 0.9, "max_new_tokens": 40,
          "eos_token_id": [5, 7], "repetition_penalty": 1.1})");
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_FLOAT_EQ(sampled->sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(sampled->sampling.top_p, 0.9f);
  EXPECT_EQ(sampled->sampling.top_k, 50u);  // transformers' default once sampling
  EXPECT_EQ(sampled->max_new_tokens, 40u);
  EXPECT_EQ(sampled->eos_token_ids, (std::vector<int32_t>{5, 7}));
  EXPECT_FLOAT_EQ(sampled->sampling.repetition_penalty, 1.1f);

  absl::StatusOr<GenerationDefaults> greedy = Read(R"({"temperature": 0.6, "eos_token_id": 3})");
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_EQ(greedy->sampling.temperature, 0.0f);
  EXPECT_EQ(greedy->eos_token_ids, (std::vector<int32_t>{3}));
}

TEST_F(GenerationDefaultsTest, ABadFieldIsAnErrorNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"max_new_tokens": -5})", "generation_config.json: max_new_tokens: must be in [1, "},
      {R"({"max_new_tokens": 1e30})", "generation_config.json: max_new_tokens: expected an integer"},
      {R"({"eos_token_id": [2, "x"]})", "generation_config.json: eos_token_id[1]: expected an integer"},
      {R"({"eos_token_id": 4294967296})", "generation_config.json: eos_token_id: is not a token id"},
      {R"({"do_sample": "yes"})", "generation_config.json: do_sample: expected true or false"},
      {R"({"do_sample": true, "top_p": 1.5})", "generation_config.json: top_p: must be in (0, 1]"},
      {R"({"do_sample": true, "temperature": -1})", "generation_config.json: temperature: must be in [0, "},
      {R"({"do_sample": true, "top_k": -1})", "generation_config.json: top_k: must be in [0, "},
      {R"({"repetition_penalty": 0})", "generation_config.json: repetition_penalty: must be in (0, "},
  };
  for (const auto& [json, expected] : cases) {
    absl::StatusOr<GenerationDefaults> defaults = Read(json);
    ASSERT_FALSE(defaults.ok()) << json;
    EXPECT_EQ(defaults.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(std::string(defaults.status().message()), HasSubstr(expected)) << json;
  }
}

}  // namespace
}  // namespace placer::model
