// Runs the fuzz targets' entry points on the writer's seed corpus, on
// deterministic mutations of it (every truncation, byte flips, deletions)
// and on saved crash reproducers, so `make test` keeps what fuzzing found.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loader/model_config.h"
#include "loader/prequantized_config.h"
#include "loader/safetensors_header.h"
#include "loader/shard_index.h"
#include "tests/fuzz/fuzz_entry_points.h"
#include "tests/fuzz/seed_corpus.h"
#include "tests/loader/test_files.h"

namespace placer::fuzz {
namespace {

using Target = std::function<int(const std::uint8_t*, std::size_t)>;

void Feed(const Target& target, const std::string& bytes) {
  target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// Every prefix, every byte flipped (first 4 KiB), every character deleted
// (first 2 KiB): cheap, deterministic neighbours of a valid input.
void RunMutations(const Target& target, const std::string& seed) {
  Feed(target, seed);
  for (std::size_t n = 0; n < seed.size(); n += seed.size() > 4096 ? 7 : 1) {
    Feed(target, seed.substr(0, n));
  }
  for (std::size_t i = 0; i < seed.size() && i < 4096; ++i) {
    std::string flipped = seed;
    flipped[i] = static_cast<char>(flipped[i] ^ 0xff);
    Feed(target, flipped);
    flipped[i] = static_cast<char>(seed[i] ^ 0x01);
    Feed(target, flipped);
  }
  for (std::size_t i = 0; i < seed.size() && i < 2048; ++i) {
    std::string deleted = seed;
    deleted.erase(i, 1);
    Feed(target, deleted);
  }
}

class FuzzRegressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SeedCorpus> corpus = WriteSeedCorpus(dir_.path());
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = *corpus;
  }
  loader::testing::TempDir dir_;
  SeedCorpus corpus_;
};

TEST_F(FuzzRegressionTest, SeedsAreValidInputs) {
  ASSERT_GE(corpus_.safetensors_header.size(), 4u);
  ASSERT_GE(corpus_.shard_index.size(), 2u);
  ASSERT_GE(corpus_.model_config.size(), 8u);
  for (const std::string& path : corpus_.safetensors_header) {
    EXPECT_TRUE(loader::ParseSafetensorsBuffer(loader::testing::ReadFileBytes(path), path).ok()) << path;
  }
  for (const std::string& path : corpus_.shard_index) {
    EXPECT_TRUE(loader::ParseShardIndex(loader::testing::ReadFileBytes(path), path).ok()) << path;
  }
  for (const std::string& path : corpus_.model_config) {
    absl::StatusOr<loader::ModelConfig> config =
        loader::ParseModelConfig(loader::testing::ReadFileBytes(path), path);
    EXPECT_TRUE(config.ok()) << config.status();
  }
}

TEST_F(FuzzRegressionTest, SafetensorsHeaderSurvivesMutations) {
  for (const std::string& path : corpus_.safetensors_header) {
    const std::string seed = loader::testing::ReadFileBytes(path);
    // The header is where the parser looks; mutate it, keep the data.
    const std::size_t header_end = 8 + loader::testing::HeaderText(seed).size();
    RunMutations(FuzzSafetensorsHeader, seed.substr(0, header_end));
    Feed(FuzzSafetensorsHeader, seed);
  }
}

TEST_F(FuzzRegressionTest, ShardIndexSurvivesMutations) {
  for (const std::string& path : corpus_.shard_index) {
    RunMutations(FuzzShardIndex, loader::testing::ReadFileBytes(path));
  }
}

TEST_F(FuzzRegressionTest, ModelConfigSurvivesMutations) {
  for (const std::string& path : corpus_.model_config) {
    RunMutations(FuzzModelConfig, loader::testing::ReadFileBytes(path));
  }
}

TEST_F(FuzzRegressionTest, QuantizeConfigSurvivesMutations) {
  ASSERT_GE(corpus_.quantize_config.size(), 3u);
  for (const std::string& path : corpus_.quantize_config) {
    const std::string seed = loader::testing::ReadFileBytes(path);
    EXPECT_TRUE(loader::ParseQuantizeConfigFile(seed, path).ok()) << path;
    RunMutations(FuzzQuantizeConfig, seed);
  }
}

TEST(FuzzRegressionInputs, CraftedAndSavedInputsDoNotCrash) {
  const std::vector<std::string> crafted = {
      "", "\xff\xff\xff\xff\xff\xff\xff\xff", std::string(8, '\0') + "{}",
      std::string("\x02\0\0\0\0\0\0\0{}", 10),
      std::string("\x40\0\0\0\0\0\0\0", 8) +
          R"({"a":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,0]}})",
      std::string(1000, '['), std::string(100000, '[') + std::string(100000, ']'),
      R"({"architectures":["LlamaForCausalLM"],"hidden_size":9223372036854775807,
          "intermediate_size":1,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":1})",
      R"({"architectures":["GPT2LMHeadModel"],"n_embd":1073741824,"n_layer":1,"n_head":3,
          "vocab_size":1})",
      R"({"weight_map":{"a":"..\\x.safetensors"}})",
  };
  for (const std::string& input : crafted) {
    Feed(FuzzSafetensorsHeader, input);
    Feed(FuzzShardIndex, input);
    Feed(FuzzModelConfig, input);
    Feed(FuzzQuantizeConfig, input);
  }
  const std::pair<const char*, Target> saved[] = {
      {"safetensors_header", FuzzSafetensorsHeader},
      {"shard_index", FuzzShardIndex},
      {"model_config", FuzzModelConfig},
      {"quantize_config", FuzzQuantizeConfig}};
  for (const auto& [name, target] : saved) {
    const std::filesystem::path dir = std::filesystem::path(PLACER_FUZZ_REGRESSIONS_DIR) / name;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      Feed(target, loader::testing::ReadFileBytes(entry.path().string()));
    }
  }
}

}  // namespace
}  // namespace placer::fuzz
