// --quantize end to end: `placer plan` sizes the decoder layers' linear weights by their packed
// bytes (embeddings and lm_head at the checkpoint's dtype, said in the plan), so a model that
// does not fit a virtual GPU in BF16 fits it in int4; a real placerd with the same flags loads
// it there and serves tokens over gRPC; a bad --quantize is refused naming the flag.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "client/placer_client.h"
#include "model/int8_activation_tiles.h"
#include "model/packed_kernels_note.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// 4 layers of ~1.2 MB in BF16 (~0.33 MB in int4, groups of 128) and 0.15 MB embeddings.
constexpr char kModelArgs[] =
    " --arch llama --layers 4 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --vocab 300"
    " --seed 5 --dtype BF16";
// Room on cuda:0 for the int4 model and its reserves, not for the BF16 one; cpu takes the rest.
constexpr char kDevices[] = "cuda:0=4MiB,cpu=1GiB";
constexpr char kLimits[] = " --max-seq-len 64 --max-batch-size 2";

class Quantize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("placer-quantize-e2e-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_.string() + kModelArgs);
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json Plan(const std::string& extra) {
    const CommandResult plan =
        RunCommand(std::string(PLACER_CLI_PATH) + " plan " + dir_.string() + " --devices " +
                   kDevices + kLimits + " --format json " + extra);
    EXPECT_EQ(plan.exit_code, 0) << plan.output;
    try {
      return nlohmann::json::parse(plan.output);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << e.what() << ": " << plan.output;
      return {};
    }
  }

  static uint64_t WeightsOn(const nlohmann::json& plan, const std::string& device) {
    for (const auto& entry : plan.at("devices")) {
      if (entry.at("name") == device) return entry.at("weights_bytes").get<uint64_t>();
    }
    return 0;
  }

  // Each generated token is the argmax of Forward's logits over the prompt and the tokens
  // before it (the 300-token vocabulary of kModelArgs).
  static void ExpectEachTokenIsTheArgmaxOfForward(client::PlacerClient& client,
                                                  std::vector<int32_t> context,
                                                  const std::vector<int32_t>& tokens) {
    for (int32_t token : tokens) {
      v1::ForwardRequest forward;
      for (int32_t id : context) forward.add_token_ids(id);
      auto logits = client.Forward(forward);
      ASSERT_TRUE(logits.ok()) << logits.status();
      const std::string& data = logits->logits().data();
      ASSERT_EQ(data.size(), 300 * sizeof(float));
      const float* values = reinterpret_cast<const float*>(data.data());
      const float* best = std::max_element(values, values + 300);
      EXPECT_EQ(best - values, token) << "logit gap " << *best - values[token] << " of range "
                                      << *best - *std::min_element(values, values + 300);
      context.push_back(token);
    }
  }

  // Greedy tokens for `prompt` (ignoring EOS), or an empty vector after a failed assertion.
  static std::vector<int32_t> Generate(client::PlacerClient& client, const std::vector<int32_t>& prompt,
                                       int new_tokens, const DaemonProcess& daemon) {
    v1::GenerateRequest request;
    for (int32_t id : prompt) request.add_prompt_token_ids(id);
    request.mutable_params()->set_max_new_tokens(new_tokens);
    request.mutable_params()->set_ignore_eos(true);
    std::vector<int32_t> tokens;
    const absl::Status generated = client.Generate(request, [&](const v1::GenerateResponse& r) {
      tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
    });
    EXPECT_TRUE(generated.ok()) << generated << "\n" << daemon.Log();
    return tokens;
  }

  fs::path dir_;
};

TEST_F(Quantize, Int4FitsAVirtualGpuWhereBf16DoesNotAndServesTokens) {
  const nlohmann::json bf16 = Plan("");
  const nlohmann::json int4 = Plan("--quantize int4");
  ASSERT_FALSE(bf16.is_null());
  ASSERT_FALSE(int4.is_null());
  EXPECT_GT(WeightsOn(bf16, "cpu"), 0u) << "BF16 was expected not to fit cuda:0:\n" << bf16.dump(2);
  EXPECT_EQ(WeightsOn(int4, "cpu"), 0u) << "int4 was expected to fit cuda:0:\n" << int4.dump(2);
  EXPECT_EQ(int4.at("device_map"), nlohmann::json({{"", 0}})) << int4.dump(2);
  // Packed bytes: 4 layers at 0.5625 bytes per linear weight (+ norms), then BF16 embeddings
  // and head (2 x 300 x 256 x 2 bytes) and the final norm.
  const uint64_t linear = 4 * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256);
  const uint64_t expected = linear / 128 * (8 + 64) + 4 * 2 * 256 * 2 + 2 * 300 * 256 * 2 + 256 * 2;
  EXPECT_EQ(WeightsOn(int4, "cuda:0"), expected);
  EXPECT_NE(int4.at("quantize").at("summary").get<std::string>().find("lm_head stay BF16"),
            std::string::npos)
      << int4.dump(2);
  EXPECT_EQ(int4.at("quantize").at("group_size"), 128);

  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--devices", kDevices,
                                          "--max-seq-len", "64", "--max-batch-size", "2",
                                          "--quantize", "int4"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  EXPECT_NE(daemon.Log().find("Quantized: --quantize int4 (groups of 128)"), std::string::npos)
      << daemon.Log();
  // Which kernels multiply the packed weights on this CPU (BF16 rows here).
  const std::string kernels = model::PackedKernelsNote(loader::DType::kBF16);
  ASSERT_EQ(kernels.rfind("packed kernels (BF16 rows): ", 0), 0u) << kernels;
  EXPECT_NE(daemon.Log().find(kernels), std::string::npos) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(20)});
  v1::GenerateRequest request;
  for (int id : {1, 50, 60, 7}) request.add_prompt_token_ids(id);
  request.mutable_params()->set_max_new_tokens(6);
  request.mutable_params()->set_ignore_eos(true);
  std::vector<int32_t> tokens;
  std::string finish;
  const absl::Status generated = client.Generate(request, [&](const v1::GenerateResponse& r) {
    tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
    if (!r.finish_reason().empty()) finish = r.finish_reason();
  });
  ASSERT_TRUE(generated.ok()) << generated << "\n" << daemon.Log();
  EXPECT_EQ(tokens.size(), 6u);
  EXPECT_EQ(finish, "length");
  // Greedy tokens are the argmax of Forward over what came before (same packed weights).
  ExpectEachTokenIsTheArgmaxOfForward(client, {1, 50, 60, 7}, tokens);
}

TEST_F(Quantize, QuantizeLmHeadPlansAndServesTheHeadPacked) {
  const nlohmann::json layers = Plan("--quantize int4");
  const nlohmann::json head = Plan("--quantize int4 --quantize-lm-head int8");
  ASSERT_FALSE(layers.is_null());
  ASSERT_FALSE(head.is_null());
  // lm_head [300, 256]: BF16 300 x 256 x 2 bytes, int8 per output 300 x (8 + 256).
  EXPECT_EQ(WeightsOn(layers, "cuda:0") - WeightsOn(head, "cuda:0"),
            300u * 256 * 2 - 300u * (8 + 256));
  EXPECT_EQ(head.at("quantize").at("lm_head"), "int8") << head.dump(2);
  EXPECT_NE(head.at("quantize").at("summary").get<std::string>().find(
                "int4 (groups of 128); lm_head int8 (one scale per output channel): decoder-layer "
                "linear weights and lm_head, sized and held packed"),
            std::string::npos)
      << head.dump(2);

  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--devices", kDevices,
                                          "--max-seq-len", "64", "--max-batch-size", "2",
                                          "--quantize", "int4", "--quantize-lm-head", "int8"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  EXPECT_NE(daemon.Log().find("lm_head int8 (one scale per output channel)"), std::string::npos)
      << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(20)});
  // GetModelInfo says what is quantized, in the plan's words.
  const absl::StatusOr<v1::ModelInfo> info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_TRUE(info->has_quantization());
  EXPECT_EQ(info->quantization().source(), "--quantize");
  EXPECT_EQ(info->quantization().summary(), head.at("quantize").at("summary").get<std::string>());
  EXPECT_EQ(info->quantization().activations(), "float");
  const std::vector<int32_t> tokens = Generate(client, {1, 50, 60, 7}, 4, daemon);
  EXPECT_EQ(tokens.size(), 4u);
}

// A tied lm_head (Llama 3.2, Qwen2.5's small models, GPT-2) is the embedding's table: under
// --quantize-lm-head it is packed once, the head multiplies it packed and the lookup
// dequantizes the rows it reads.
TEST_F(Quantize, ATiedHeadIsOnePackedTableThatServes) {
  const fs::path tied = dir_ / "tied";
  const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                        tied.string() + kModelArgs + " --tie-word-embeddings true");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const auto plan = [&](const std::string& extra) {
    const CommandResult result =
        RunCommand(std::string(PLACER_CLI_PATH) + " plan " + tied.string() + " --devices " +
                   kDevices + kLimits + " --format json " + extra);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return nlohmann::json::parse(result.output, nullptr, false);
  };
  const nlohmann::json layers = plan("--quantize int4");
  const nlohmann::json head = plan("--quantize int4 --quantize-lm-head int8");
  ASSERT_FALSE(layers.is_discarded() || head.is_discarded());
  // The table [300, 256]: BF16 300 x 256 x 2 bytes, int8 per row 300 x (8 + 256), counted once.
  const auto all_weights = [&](const nlohmann::json& p) {
    return WeightsOn(p, "cuda:0") + WeightsOn(p, "cpu");
  };
  EXPECT_EQ(all_weights(layers) - all_weights(head), 300u * 256 * 2 - 300u * (8 + 256))
      << head.dump(2);
  EXPECT_NE(head.at("quantize").at("summary").get<std::string>().find(
                "the lm_head is tied: one packed table"),
            std::string::npos)
      << head.dump(2);

  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", tied.string(), "--devices", kDevices,
                                          "--max-seq-len", "64", "--max-batch-size", "2",
                                          "--quantize", "int4", "--quantize-lm-head", "int8"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(20)});
  const std::vector<int32_t> tokens = Generate(client, {1, 50, 60, 7}, 4, daemon);
  ASSERT_EQ(tokens.size(), 4u);
  ExpectEachTokenIsTheArgmaxOfForward(client, {1, 50, 60, 7}, tokens);
}

// int4 and int8 weights (the test model's inputs are multiples of 128) both take them. A short
// prompt's rows, the decode steps after it and Forward's rows all attend through the same
// per-row kernel (AttendSequences), and the int8-activation products give a row the same bits
// in any batch: each token is exactly the argmax of Forward. (When the prompt's rows took
// ATen's attention and the decode rows the kernel, their last float bits differed, and int8
// activation codes carried that into 1 % of this random model's logit range: a near-tie flipped.)
TEST_F(Quantize, Int8ActivationsServeTheGreedyTokensOfTheirOwnLogitsAndSaySo) {
 for (const char* scheme : {"int4", "int8"}) {
  SCOPED_TRACE(scheme);
  const nlohmann::json plan = Plan(std::string("--quantize ") + scheme + " --quantize-activations int8");
  ASSERT_FALSE(plan.is_null());
  EXPECT_EQ(plan.at("quantize").at("activations"), "int8") << plan.dump(2);
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--devices", "cpu=1GiB",
                                          "--max-seq-len", "64", "--max-batch-size", "2",
                                          "--quantize", scheme, "--quantize-activations", "int8",
                                          "--dtype", "F32"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  __builtin_cpu_init();
  // AVX2 and FMA run the int8 kernel (vpmaddubsw where neither VNNI runs).
  const bool int8_kernel = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // Every linear weight of the 4 layers (the head stays float).
  EXPECT_NE(daemon.Log().find(int8_kernel ? "int8: 28 packed weights"
                                          : "this CPU lacks AVX2; activations stay float"),
            std::string::npos)
      << daemon.Log();
  // Where AMX-INT8 runs, prompt chunks take its tiles, and the log says so (and only there).
  EXPECT_EQ(daemon.Log().find("prompt chunks past 16 rows on AMX-INT8 tiles") != std::string::npos,
            int8_kernel && model::Int8ActivationTilesRun())
      << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(20)});
  const absl::StatusOr<v1::ModelInfo> info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->quantization().activations(), int8_kernel ? "int8" : "float");
  const std::vector<int32_t> tokens = Generate(client, {3, 9, 27, 81}, 5, daemon);
  ASSERT_EQ(tokens.size(), 5u);
  // Every row takes the same path whatever its batch: decode steps agree with Forward.
  ExpectEachTokenIsTheArgmaxOfForward(client, {3, 9, 27, 81}, tokens);
 }
}

// Weights whose inputs are not a multiple of 128 (int8, one scale per channel) keep float
// activations: the daemon says the flag reached no weight instead of claiming int8 activations.
TEST_F(Quantize, Int8ActivationsThatReachNoWeightSaySo) {
  const fs::path narrow = dir_.string() + "-narrow";
  const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                        narrow.string() +
                                        " --arch llama --layers 1 --hidden 96 --heads 4 --kv-heads 2"
                                        " --intermediate 160 --vocab 300 --seed 5");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", narrow.string(), "--devices", "cpu=1GiB",
                                          "--max-seq-len", "64", "--max-batch-size", "2",
                                          "--quantize", "int8", "--quantize-activations", "int8"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  EXPECT_NE(daemon.Log().find("no weight of this model takes int8 activations"), std::string::npos)
      << daemon.Log();
  EXPECT_EQ(daemon.Log().find("multiply int8 activations"), std::string::npos) << daemon.Log();
  client::PlacerClient client({ports.target(), seconds(20)});
  const absl::StatusOr<v1::ModelInfo> info = client.GetModelInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->quantization().activations(), "float");
  fs::remove_all(narrow);
}

TEST_F(Quantize, BadQuantizeFlagsAreRefusedNamingTheFlag) {
  const CommandResult scheme = RunCommand(std::string(PLACER_CLI_PATH) + " plan " +
                                          dir_.string() + " --quantize int3");
  EXPECT_NE(scheme.exit_code, 0);
  EXPECT_NE(scheme.output.find("--quantize"), std::string::npos) << scheme.output;
  const CommandResult group = RunCommand(std::string(PLACER_CLI_PATH) + " plan " + dir_.string() +
                                         " --quantize int4 --quantize-group-size 64");
  EXPECT_NE(group.exit_code, 0);
  EXPECT_NE(group.output.find("--quantize-group-size 64"), std::string::npos) << group.output;
  const CommandResult head = RunCommand(std::string(PLACER_CLI_PATH) + " plan " + dir_.string() +
                                        " --quantize-lm-head int3");
  EXPECT_NE(head.exit_code, 0);
  EXPECT_NE(head.output.find("--quantize-lm-head"), std::string::npos) << head.output;
}

}  // namespace
}  // namespace placer::testing
