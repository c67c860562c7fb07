// placer's forward pass against a plain PyTorch eager implementation (reference_forward.py,
// run by Debian's /usr/bin/python3 with python3-torch) on the same safetensors files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;

struct ReferenceCase {
  std::string name;
  std::string writer_args;       // for placer-make-checkpoint
  nlohmann::json config_patch;   // merged into config.json after writing
};

std::ostream& operator<<(std::ostream& out, const ReferenceCase& c) { return out << c.name; }

int RunShell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<float> ReadFloats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// A checkpoint from placer-make-checkpoint in a fresh temporary directory `name`-<pid>.
fs::path WriteCheckpoint(const std::string& name, const std::string& writer_args) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  EXPECT_EQ(RunShell(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " + dir.string() + " " +
                     writer_args + " > /dev/null"),
            0);
  return dir;
}

// Merges `patch` into the checkpoint's config.json.
void PatchConfig(const fs::path& dir, const nlohmann::json& patch) {
  nlohmann::json config;
  std::ifstream(dir / "config.json") >> config;
  config.merge_patch(patch);
  std::ofstream(dir / "config.json") << config.dump(2);
}

class ForwardMatchesReference : public ::testing::TestWithParam<ReferenceCase> {
 protected:
  void SetUp() override {
    dir_ = WriteCheckpoint("placer-ref-" + GetParam().name, GetParam().writer_args);
    if (!GetParam().config_patch.is_null()) PatchConfig(dir_, GetParam().config_patch);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(ForwardMatchesReference, LogitsOfEveryPosition) {
  auto checkpoint = loader::Checkpoint::Open(dir_.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto model = LoadCausalLm(*checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();

  const std::vector<int32_t> tokens = {1, 17, 300, 5, 99, 1023, 42, 7, 7, 256, 2, 640};
  auto logits = (*model)->Forward(tokens, /*all_positions=*/true);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->shape, (std::vector<int64_t>{12, (*model)->vocab_size()}));

  std::string token_text;
  for (int32_t token : tokens) token_text += (token_text.empty() ? "" : ",") + std::to_string(token);
  const fs::path out = dir_ / "reference.f32";
  ASSERT_EQ(RunShell("/usr/bin/python3 " + std::string(PLACER_SOURCE_DIR) +
                "/tests/model/reference_forward.py " + dir_.string() + " " + token_text + " " +
                out.string()),
            0);
  const std::vector<float> reference = ReadFloats(out);
  ASSERT_EQ(reference.size(), logits->values.size());

  float largest = 0, worst = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    largest = std::max(largest, std::fabs(reference[i]));
    worst = std::max(worst, std::fabs(reference[i] - logits->values[i]));
  }
  EXPECT_GT(largest, 0.01f) << "degenerate logits prove nothing";
  EXPECT_LE(worst, 1e-4f * std::max(1.0f, largest)) << "largest |logit| " << largest;

  // The last-position answer is the last row of the all-positions answer.
  auto last = (*model)->Forward(tokens, /*all_positions=*/false);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->shape, (std::vector<int64_t>{1, (*model)->vocab_size()}));
  const size_t offset = logits->values.size() - last->values.size();
  for (size_t i = 0; i < last->values.size(); ++i) {
    ASSERT_NEAR(last->values[i], logits->values[offset + i], 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ForwardMatchesReference,
    ::testing::Values(
        ReferenceCase{"llama_gqa", "--arch llama --preset tiny --seed 3", nullptr},
        ReferenceCase{"llama_tied_bf16_sharded",
                      "--arch llama --layers 2 --hidden 96 --heads 6 --kv-heads 3 "
                      "--intermediate 160 --vocab 1100 --dtype BF16 --tie-word-embeddings true "
                      "--max-shard-size 200KB --seed 4",
                      nullptr},
        ReferenceCase{"llama3_rope_scaling", "--arch llama --preset tiny --seed 5",
                      nlohmann::json::parse(R"({"rope_theta": 500000.0, "rope_scaling": {
                          "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8}})")},
        ReferenceCase{"llama_linear_rope_scaling", "--arch llama --preset tiny --seed 6",
                      nlohmann::json::parse(R"({"rope_scaling": {"type": "linear", "factor": 4.0}})")},
        // 12 tokens beyond the 8 positions of the config: the rotary base is rescaled.
        ReferenceCase{"llama_dynamic_rope_scaling_beyond_max_positions",
                      "--arch llama --preset tiny --seed 8",
                      nlohmann::json::parse(R"({"max_position_embeddings": 8,
                          "rope_scaling": {"type": "dynamic", "factor": 2.0}})")},
        // 12 tokens through a window of 4: every layer masks the keys before it.
        ReferenceCase{"mistral_sliding_window", "--arch llama --preset tiny --seed 9",
                      nlohmann::json::parse(R"({"architectures": ["MistralForCausalLM"],
                          "model_type": "mistral", "sliding_window": 4})")},
        ReferenceCase{"gpt2", "--arch gpt2 --preset tiny --seed 7", nullptr},
        // Every optional tensor of each description, written with random values.
        ReferenceCase{"llama_attention_and_mlp_biases",
                      "--arch llama --preset tiny --attention-bias --mlp-bias --seed 10", nullptr},
        ReferenceCase{"mistral_attention_bias", "--arch mistral --preset tiny --attention-bias --seed 11",
                      nullptr},
        ReferenceCase{"qwen2_qkv_and_mlp_biases", "--arch qwen2 --preset tiny --mlp-bias --seed 12",
                      nullptr},
        ReferenceCase{"gpt2_untied_head",
                      "--arch gpt2 --preset tiny --tie-word-embeddings false --seed 13", nullptr}),
    [](const ::testing::TestParamInfo<ReferenceCase>& info) { return info.param.name; });

TEST(Forward, RefusesTokensOutsideTheVocabularyNamingTheIndex) {
  const fs::path dir = WriteCheckpoint("placer-ref-bad", "--arch llama --preset tiny");
  auto checkpoint = loader::Checkpoint::Open(dir.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto model = LoadCausalLm(*checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();
  auto bad = (*model)->Forward({1, 2, static_cast<int32_t>((*model)->vocab_size())}, false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("token_ids[2]"), absl::string_view::npos);
  EXPECT_EQ((*model)->Forward({-1}, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*model)->Forward({}, false).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> too_long((*model)->max_positions() + 1, 1);
  EXPECT_EQ((*model)->Forward(too_long, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

// Decoding one token at a time through the KV cache sees the same window as the full pass
// (decode narrows the cached keys to the window; prefill masks), and the window matters.
TEST(SlidingWindow, IncrementalDecodeEqualsTheFullPassAndDiffersFromNoWindow) {
  const fs::path dir = WriteCheckpoint("placer-ref-window", "--arch llama --preset tiny --seed 9");
  const auto load_with = [&](const nlohmann::json& patch) {
    PatchConfig(dir, patch);
    auto checkpoint = loader::Checkpoint::Open(dir.string());
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    auto model = LoadCausalLm(*checkpoint);
    EXPECT_TRUE(model.ok()) << model.status();
    return std::move(*model);
  };
  const std::vector<int32_t> tokens = {1, 17, 300, 5, 99, 1023, 42, 7, 7, 256, 2, 640, 9, 31};
  const auto full_model = load_with(nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"],
      "model_type": "llama"})"));
  auto no_window = full_model->Forward(tokens, /*all_positions=*/true);
  ASSERT_TRUE(no_window.ok()) << no_window.status();
  const auto model = load_with(nlohmann::json::parse(R"({"architectures": ["MistralForCausalLM"],
      "model_type": "mistral", "sliding_window": 4})"));
  auto full = model->Forward(tokens, /*all_positions=*/true);
  ASSERT_TRUE(full.ok()) << full.status();
  const auto vocab = static_cast<size_t>(model->vocab_size());

  auto sequence = model->NewSequence(static_cast<int64_t>(tokens.size()));
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 6);  // beyond the window
  auto step = model->Extend(**sequence, prompt);
  for (size_t position = prompt.size() - 1; position < tokens.size(); ++position) {
    if (position >= prompt.size()) step = model->Extend(**sequence, {tokens[position]});
    ASSERT_TRUE(step.ok()) << step.status();
    float largest = 0, worst = 0, from_no_window = 0;
    for (size_t i = 0; i < vocab; ++i) {
      const float want = full->values[position * vocab + i];
      largest = std::max(largest, std::fabs(want));
      worst = std::max(worst, std::fabs(step->values[i] - want));
      from_no_window = std::max(from_no_window, std::fabs(no_window->values[position * vocab + i] - want));
    }
    EXPECT_LE(worst, 1e-5f * std::max(1.0f, largest)) << "position " << position;
    // Position 4 on has keys outside the window: those rows must differ from full attention.
    EXPECT_GT(from_no_window, 1e-3f * largest) << "position " << position << ": window had no effect";
  }
  fs::remove_all(dir);
}

// With the window on every layer a sequence holds one window of positions (a ring of
// blocks), however long it grows: a 48-position sequence with window 4 decodes from one
// block of 16 to the same logits as the full pass, through a prompt longer than the ring.
TEST(SlidingWindow, RingOfOneBlockServesASequenceThreeTimesItsSize) {
  const fs::path dir = WriteCheckpoint("placer-ref-ring", "--arch llama --preset tiny --seed 5");
  PatchConfig(dir, nlohmann::json::parse(R"({"architectures": ["MistralForCausalLM"],
      "model_type": "mistral", "sliding_window": 4})"));
  auto checkpoint = loader::Checkpoint::Open(dir.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto model = LoadCausalLm(*checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 48; ++i) tokens.push_back((i * 37 + 11) % 2000);
  auto full = (*model)->Forward(tokens, /*all_positions=*/true);
  ASSERT_TRUE(full.ok()) << full.status();
  const auto vocab = static_cast<size_t>((*model)->vocab_size());

  auto sequence = (*model)->NewSequence(static_cast<int64_t>(tokens.size()));
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  const auto& cache = static_cast<const KvCache&>(**sequence);
  EXPECT_EQ(cache.blocks().size(), 1u) << "one window of 4 positions rounds up to one block";
  EXPECT_TRUE(cache.ring());
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 20);  // longer than the ring
  auto step = (*model)->Extend(**sequence, prompt);
  for (size_t position = prompt.size() - 1; position < tokens.size(); ++position) {
    if (position >= prompt.size()) step = (*model)->Extend(**sequence, {tokens[position]});
    ASSERT_TRUE(step.ok()) << step.status();
    float largest = 0, worst = 0;
    for (size_t i = 0; i < vocab; ++i) {
      const float want = full->values[position * vocab + i];
      largest = std::max(largest, std::fabs(want));
      worst = std::max(worst, std::fabs(step->values[i] - want));
    }
    EXPECT_LE(worst, 1e-5f * std::max(1.0f, largest)) << "position " << position;
  }
  // The sequence is at its capacity: one more token is refused, not written over the ring.
  auto beyond = (*model)->Extend(**sequence, {1});
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument) << beyond.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace placer::model
