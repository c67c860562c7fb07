// Every bad checkpoint gets an error naming the file (and tensor) and the
// reason. Each case starts from a good checkpoint on disk and corrupts it.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "loader/checkpoint.h"
#include "tests/loader/test_checkpoint.h"
#include "tests/loader/test_files.h"

namespace placer::loader {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;
using testing::TinySpec;
using testing::WriteFileBytes;
using testing::WriteTestCheckpoint;

// Expects Open(dir) to fail with a message containing every needle.
void ExpectOpenFails(const std::string& dir, std::initializer_list<std::string> needles) {
  absl::StatusOr<std::shared_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok()) << "opened a bad checkpoint in " << dir;
  for (const std::string& needle : needles) {
    EXPECT_NE(std::string(checkpoint.status().message()).find(needle), std::string::npos)
        << "missing \"" << needle << "\" in: " << checkpoint.status().message();
  }
}

class CheckpointErrorsTest : public ::testing::Test {
 protected:
  void WriteSingle() { WriteTestCheckpoint(dir_.path(), TinySpec("llama")); }
  void WriteSharded() {
    const WrittenCheckpoint written = WriteTestCheckpoint(dir_.path(), TinySpec("llama"), 60000);
    ASSERT_EQ(written.shard_count, 3);
  }
  std::string Path(const std::string& name) const { return dir_ / name; }
  nlohmann::json ReadJson(const std::string& name) const {
    return nlohmann::json::parse(ReadFileBytes(Path(name)));
  }
  void WriteJson(const std::string& name, const nlohmann::json& json) {
    WriteFileBytes(Path(name), json.dump());
  }

  TempDir dir_;
};

TEST_F(CheckpointErrorsTest, MissingAndEmptyDirectory) {
  ExpectOpenFails(Path("nope"), {"nope", "does not exist"});
  ExpectOpenFails(dir_.path(), {dir_.path(), "empty"});
}

TEST_F(CheckpointErrorsTest, MissingConfig) {
  WriteSingle();
  std::filesystem::remove(Path("config.json"));
  ExpectOpenFails(dir_.path(), {"config.json", "missing"});
}

TEST_F(CheckpointErrorsTest, PickleOnlyCheckpointIsRefusedWithHowToConvert) {
  WriteFileBytes(Path("pytorch_model.bin"), "\x80\x02}q\x00.");
  WriteFileBytes(Path("config.json"), "{}");
  ExpectOpenFails(dir_.path(), {"pytorch_model.bin", "arbitrary code", "safe_serialization=True"});
}

TEST_F(CheckpointErrorsTest, PickleNextToSafetensorsIsIgnored) {
  WriteSingle();
  WriteFileBytes(Path("pytorch_model.bin"), "\x80\x02}q\x00.");
  EXPECT_TRUE(Checkpoint::Open(dir_.path()).ok());
}

TEST_F(CheckpointErrorsTest, TruncatedShard) {
  WriteSingle();
  std::filesystem::resize_file(Path("model.safetensors"),
                               std::filesystem::file_size(Path("model.safetensors")) - 1);
  ExpectOpenFails(dir_.path(), {"model.safetensors", "past the end", "truncated"});
}

TEST_F(CheckpointErrorsTest, HeaderLengthCorrupt) {
  WriteSingle();
  std::string bytes = ReadFileBytes(Path("model.safetensors"));
  bytes[6] = '\x7f';
  WriteFileBytes(Path("model.safetensors"), bytes);
  ExpectOpenFails(dir_.path(), {"model.safetensors", "header length"});
}

TEST_F(CheckpointErrorsTest, HeaderJsonCorrupt) {
  WriteSingle();
  std::string bytes = ReadFileBytes(Path("model.safetensors"));
  bytes[8] = 'x';  // the header's opening brace
  WriteFileBytes(Path("model.safetensors"), bytes);
  ExpectOpenFails(dir_.path(), {"model.safetensors", "not valid JSON"});
}

TEST_F(CheckpointErrorsTest, ShapeDisagreesWithConfig) {
  WriteSingle();
  nlohmann::json config = ReadJson("config.json");
  config["intermediate_size"] = 64;
  WriteJson("config.json", config);
  ExpectOpenFails(dir_.path(), {"model.safetensors", "model.layers.0.mlp.gate_proj.weight",
                                "[48, 32]", "[64, 32]"});
}

TEST_F(CheckpointErrorsTest, TensorMissingForConfig) {
  WriteSingle();
  nlohmann::json config = ReadJson("config.json");
  config["num_hidden_layers"] = 3;
  WriteJson("config.json", config);
  ExpectOpenFails(dir_.path(), {"model.layers.2.self_attn.q_proj.weight", "missing"});
}

TEST_F(CheckpointErrorsTest, UnexpectedTensorForConfig) {
  WriteSingle();
  nlohmann::json config = ReadJson("config.json");
  config["num_hidden_layers"] = 1;
  WriteJson("config.json", config);
  ExpectOpenFails(dir_.path(), {"model.layers.1.", "not part of LlamaForCausalLM"});
}

TEST_F(CheckpointErrorsTest, UnknownArchitecture) {
  WriteSingle();
  nlohmann::json config = ReadJson("config.json");
  config["architectures"] = {"FalconForCausalLM"};
  WriteJson("config.json", config);
  ExpectOpenFails(dir_.path(), {"config.json", "FalconForCausalLM", "GPT2LMHeadModel"});
}

TEST_F(CheckpointErrorsTest, IndexListsTensorAbsentFromShard) {
  WriteSharded();
  nlohmann::json index = ReadJson("model.safetensors.index.json");
  index["weight_map"]["model.layers.0.mlp.extra.weight"] = "model-00001-of-00003.safetensors";
  index["weight_map"].erase("model.norm.weight");
  WriteJson("model.safetensors.index.json", index);
  ExpectOpenFails(dir_.path(), {"model.safetensors.index.json"});
}

TEST_F(CheckpointErrorsTest, IndexNamesTensorThatNoShardHolds) {
  WriteSharded();
  nlohmann::json index = ReadJson("model.safetensors.index.json");
  const std::string first = index["weight_map"].begin().value();
  index["weight_map"]["model.ghost.weight"] = first;
  WriteJson("model.safetensors.index.json", index);
  ExpectOpenFails(dir_.path(), {"model.safetensors.index.json", "model.ghost.weight", "absent"});
}

TEST_F(CheckpointErrorsTest, ShardMissing) {
  WriteSharded();
  std::filesystem::remove(Path("model-00002-of-00003.safetensors"));
  ExpectOpenFails(dir_.path(), {"model-00002-of-00003.safetensors", "missing"});
}

TEST_F(CheckpointErrorsTest, TensorInTwoShards) {
  WriteSharded();
  // Shard 1's contents copied over shard 2: its tensors are now in two shards.
  std::filesystem::copy_file(Path("model-00001-of-00003.safetensors"),
                             Path("model-00002-of-00003.safetensors"),
                             std::filesystem::copy_options::overwrite_existing);
  ExpectOpenFails(dir_.path(), {"model.embed_tokens.weight", "model-00001-of-00003.safetensors",
                                "model-00002-of-00003.safetensors"});
}

TEST_F(CheckpointErrorsTest, TensorInAShardTheIndexDoesNotName) {
  WriteSharded();
  nlohmann::json index = ReadJson("model.safetensors.index.json");
  const std::string holder = index["weight_map"]["model.norm.weight"];
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors";
  WriteJson("model.safetensors.index.json", index);
  ExpectOpenFails(dir_.path(), {"model.norm.weight", holder});
}

TEST_F(CheckpointErrorsTest, ShardsWithoutIndex) {
  WriteSharded();
  std::filesystem::remove(Path("model.safetensors.index.json"));
  ExpectOpenFails(dir_.path(), {"model.safetensors.index.json", "model-00001-of-00003"});
}

TEST_F(CheckpointErrorsTest, InvalidSideFilesAreNamed) {
  WriteSingle();
  WriteFileBytes(Path("tokenizer.json"), "{\"model\": ");
  ExpectOpenFails(dir_.path(), {"tokenizer.json", "not valid JSON"});
  std::filesystem::remove(Path("tokenizer.json"));
  WriteFileBytes(Path("generation_config.json"), "[1]");
  ExpectOpenFails(dir_.path(), {"generation_config.json", "object"});
}

TEST_F(CheckpointErrorsTest, UnreadableFiles) {
  WriteSingle();
  std::filesystem::remove(Path("config.json"));
  std::filesystem::create_directory(Path("config.json"));
  ExpectOpenFails(dir_.path(), {"config.json", "not a regular file"});
  std::filesystem::remove(Path("config.json"));
  WriteSingle();
  // A weights file that vanished (dangling link) after the directory was listed.
  std::filesystem::remove(Path("model.safetensors"));
  std::filesystem::create_symlink(Path("gone.safetensors"), Path("model.safetensors"));
  ExpectOpenFails(dir_.path(), {"model.safetensors", "No such file"});
  std::filesystem::remove(Path("model.safetensors"));
  WriteSingle();
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  ::chmod(Path("model.safetensors").c_str(), 0);
  ExpectOpenFails(dir_.path(), {"model.safetensors", "Permission denied"});
}

}  // namespace
}  // namespace placer::loader
