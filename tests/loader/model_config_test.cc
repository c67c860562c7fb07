#include "loader/model_config.h"

#include <string>

#include <gtest/gtest.h>

#include "loader/shard_index.h"

namespace placer::loader {
namespace {

constexpr char kLlama3[] = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "attention_bias": false, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})";

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST(ModelConfigTest, ParsesLlama3) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(kLlama3, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kLlama);
  EXPECT_EQ(config->hidden_size, 4096);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->head_dim, 128);
  EXPECT_EQ(config->vocab_size, 128256);
  EXPECT_DOUBLE_EQ(config->norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  ASSERT_TRUE(config->rope_scaling.has_value());
  EXPECT_EQ(config->rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(config->rope_scaling->factor, 8.0);
  EXPECT_EQ(config->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(*config->rope_scaling->high_freq_factor, 4.0);
  EXPECT_FALSE(config->qkv_bias);
  EXPECT_EQ(config->torch_dtype, "bfloat16");
  EXPECT_EQ(config->bos_token_id, 128000);
  EXPECT_EQ(config->eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
}

TEST(ModelConfigTest, AppliesLlamaDefaults) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(
      R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
          "eos_token_id": 2, "sliding_window": 4096, "rope_scaling": {"type": "linear", "factor": 2}})",
      "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kMistral);
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_EQ(config->eos_token_ids, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(config->sliding_window, 4096);
  EXPECT_EQ(config->rope_scaling->rope_type, "linear");
}

TEST(ModelConfigTest, Qwen2ImpliesQkvBiasButNoOutputBias) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(
      R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 100, "tie_word_embeddings": true})",
      "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->qkv_bias);
  EXPECT_FALSE(config->o_proj_bias);
  EXPECT_TRUE(config->tie_word_embeddings);
}

TEST(ModelConfigTest, AttentionWindowFollowsEachArchitecturesRule) {
  const auto parse = [](const std::string& architecture, const std::string& extra) {
    absl::StatusOr<ModelConfig> config = ParseModelConfig(
        R"({"architectures": [")" + architecture + R"("], "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
            "vocab_size": 100)" + extra + "}",
        "config.json");
    EXPECT_TRUE(config.ok()) << config.status();
    return *config;
  };
  // Mistral: every layer; a null window (Mistral v0.2) is full attention.
  const ModelConfig mistral = parse("MistralForCausalLM", R"(, "sliding_window": 4096)");
  EXPECT_EQ(mistral.attention_window(0), 4096);
  EXPECT_EQ(mistral.attention_window(3), 4096);
  EXPECT_EQ(parse("MistralForCausalLM", R"(, "sliding_window": null)").attention_window(0), 0);
  // Qwen2 ships sliding_window with use_sliding_window false: no window.
  EXPECT_EQ(parse("Qwen2ForCausalLM", R"(, "sliding_window": 32768)").attention_window(3), 0);
  const ModelConfig qwen2 = parse("Qwen2ForCausalLM", R"(, "sliding_window": 8,
      "use_sliding_window": true, "max_window_layers": 2)");
  EXPECT_EQ(qwen2.attention_window(1), 0);
  EXPECT_EQ(qwen2.attention_window(2), 8);
  // Llama has no sliding window even when the field is there.
  EXPECT_EQ(parse("LlamaForCausalLM", R"(, "sliding_window": 4096)").attention_window(0), 0);
  // A window on every layer bounds what a sequence's KV cache holds; one full layer does not.
  EXPECT_EQ(mistral.shared_attention_window(), 4096);
  EXPECT_EQ(qwen2.shared_attention_window(), 0);
  EXPECT_EQ(parse("Qwen2ForCausalLM", R"(, "sliding_window": 8, "use_sliding_window": true,
      "max_window_layers": 0)").shared_attention_window(), 8);
  EXPECT_EQ(parse("LlamaForCausalLM", "").shared_attention_window(), 0);
  // A window of the wrong type is refused naming the field.
  EXPECT_FALSE(ParseModelConfig(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
      "vocab_size": 100, "use_sliding_window": "yes"})", "config.json").ok());
}

TEST(ModelConfigTest, ParsesGpt2WithDefaults) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(
      R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_layer": 12, "n_head": 12,
          "n_positions": 1024, "vocab_size": 50257, "n_inner": null,
          "layer_norm_epsilon": 1e-05, "bos_token_id": 50256, "eos_token_id": 50256})",
      "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->is_gpt2());
  EXPECT_EQ(config->hidden_size, 768);
  EXPECT_EQ(config->intermediate_size, 3072);
  EXPECT_EQ(config->max_position_embeddings, 1024);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_TRUE(config->qkv_bias);
}

TEST(ModelConfigTest, UnknownArchitectureListsSupportedOnes) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(R"({"architectures": ["BertModel"]})", "dir/config.json");
  ASSERT_FALSE(config.ok());
  for (const char* name : {"BertModel", "LlamaForCausalLM", "MistralForCausalLM",
                           "Qwen2ForCausalLM", "GPT2LMHeadModel", "dir/config.json"}) {
    EXPECT_NE(Message(config.status()).find(name), std::string::npos) << config.status();
  }
}

TEST(ModelConfigTest, WrongTypesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "64"})", "config.json: hidden_size: "},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 1,
           "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 9,
           "rms_norm_eps": "small"})", "config.json: rms_norm_eps: "},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 1,
           "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 9,
           "tie_word_embeddings": 1})", "config.json: tie_word_embeddings: "},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 1,
           "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 9,
           "eos_token_id": "2"})", "config.json: eos_token_id: "},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 1,
           "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 9,
           "rope_scaling": {"rope_type": "llama3", "factor": 8}})", "rope_scaling"},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 1,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3,
           "vocab_size": 9})", "config.json: num_key_value_heads: "},
      {R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": -1, "n_head": 4,
           "vocab_size": 9})", "config.json: n_layer: "},
      {R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 1,
           "num_hidden_layers": 1000000000, "num_attention_heads": 4, "vocab_size": 9})",
       "config.json: num_hidden_layers: "},
      {R"({"architectures": "LlamaForCausalLM"})", "config.json: architectures: "},
  };
  for (const auto& [json, field] : cases) {
    absl::StatusOr<ModelConfig> config = ParseModelConfig(json, "config.json");
    ASSERT_FALSE(config.ok()) << json;
    EXPECT_NE(Message(config.status()).find(field), std::string::npos) << config.status();
  }
  EXPECT_FALSE(ParseModelConfig("{not json", "config.json").ok());
  EXPECT_FALSE(ParseModelConfig("[]", "config.json").ok());
}

TEST(ShardIndexTest, ParsesWeightMapAndTotalSize) {
  absl::StatusOr<ShardIndex> index = ParseShardIndex(
      R"({"metadata": {"total_size": 1234}, "weight_map": {
           "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
           "c": "model-00002-of-00002.safetensors"}})",
      "index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->total_size, 1234u);
  EXPECT_EQ(index->weight_map.at("c"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(index->ShardFiles().size(), 2u);
}

TEST(ShardIndexTest, RefusesBadIndexes) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"metadata": {}})", "weight_map"},
      {R"({"weight_map": []})", "weight_map"},
      {R"({"weight_map": {}})", "no tensors"},
      {R"({"weight_map": {"a": 3}})", "\"a\""},
      {R"({"weight_map": {"a": "../../etc/passwd.safetensors"}})", "plain"},
      {R"({"weight_map": {"a": "model.bin"}})", "plain"},
      {R"({"metadata": {"total_size": -1}, "weight_map": {"a": "m.safetensors"}})", "total_size"},
      {R"({"weight_map": {"a": "m.safetensors"})", "JSON"},
  };
  for (const auto& [json, needle] : cases) {
    absl::StatusOr<ShardIndex> index = ParseShardIndex(json, "index.json");
    ASSERT_FALSE(index.ok()) << json;
    EXPECT_NE(Message(index.status()).find(needle), std::string::npos) << index.status();
    EXPECT_NE(Message(index.status()).find("index.json"), std::string::npos) << index.status();
  }
}

}  // namespace
}  // namespace placer::loader
