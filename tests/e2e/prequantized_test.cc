// Pre-quantized checkpoints end to end: for GPTQ, AWQ and compressed-tensors (pack-quantized,
// int-quantized, and several config groups mixing them) checkpoints written by the independent Python packer
// (tests/model/prequantized_writer.py), a real placerd serves over gRPC the greedy tokens that a
// second placerd serving the float dequantization of the same tensors serves; `placer plan`
// sizes the linear weights in their packed bytes and names the format; --quantize on top of
// one is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

struct Format {
  std::string name, writer_args, description;
  int bits;
  int64_t group_size;  // -1: all inputs
  // Linears the checkpoint leaves unquantized in every layer ("mlp.down_proj"), and the
  // config field that says so.
  std::set<std::string> float_linears = {};
  std::string float_field = "";
  // GPTQ lm_head: true (the writer's --lm-head): the base's vocabulary packs into 4-bit words.
  bool lm_head = false;
  // Several compressed-tensors config groups: {bits, group size} of the linears (in every
  // layer) that are not in `bits`/`group_size`.
  std::map<std::string, std::pair<int, int64_t>> other_schemes = {};
};
void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

class Prequantized : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("placer-prequantized-e2e-", getpid(), "-", GetParam().name);
    fs::remove_all(dir_);
    const CommandResult made = RunCommand(absl::StrCat(
        PLACER_MAKE_CHECKPOINT_PATH, " --out ", (dir_ / "base").string(),
        " --arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256"
        " --vocab ", GetParam().lm_head ? 304 : 300, " --attention-bias --mlp-bias --seed 41"));
    ASSERT_EQ(made.exit_code, 0) << made.output;
    const CommandResult written = RunCommand(absl::StrCat(
        "/usr/bin/python3 ", PLACER_SOURCE_DIR, "/tests/model/prequantized_writer.py ",
        (dir_ / "base").string(), " ", model(), " ", reference(), " ", GetParam().writer_args));
    ASSERT_EQ(written.exit_code, 0) << written.output;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string model() const { return (dir_ / "model").string(); }
  std::string reference() const { return (dir_ / "reference").string(); }

  // Greedy tokens after a fixed prompt from a placerd serving `checkpoint`; its log in `log`,
  // its GetModelInfo in `info`.
  std::vector<int32_t> GreedyTokens(const std::string& checkpoint, std::string* log,
                                    v1::ModelInfo* info, const std::vector<std::string>& extra = {}) {
    const StartedDaemon ports = PickPorts();
    std::vector<std::string> args = {"--model", checkpoint, "--max-seq-len", "64",
                                     "--max-batch-size", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    DaemonProcess daemon(DaemonArgs(ports, args));
    EXPECT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
    client::PlacerClient client({ports.target(), seconds(20)});
    const absl::StatusOr<v1::ModelInfo> model_info = client.GetModelInfo();
    EXPECT_TRUE(model_info.ok()) << model_info.status();
    if (model_info.ok()) *info = *model_info;
    v1::GenerateRequest request;
    for (int id : {1, 50, 60, 7, 120, 33}) request.add_prompt_token_ids(id);
    request.mutable_params()->set_max_new_tokens(12);
    request.mutable_params()->set_ignore_eos(true);
    std::vector<int32_t> tokens;
    const absl::Status generated = client.Generate(request, [&](const v1::GenerateResponse& r) {
      tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
    });
    EXPECT_TRUE(generated.ok()) << generated << "\n" << daemon.Log();
    *log = daemon.Log();
    return tokens;
  }

  fs::path dir_;
};

TEST_P(Prequantized, ServesTheGreedyTokensOfItsDequantizedReference) {
  std::string log, reference_log;
  v1::ModelInfo info, reference_info;
  const std::vector<int32_t> tokens = GreedyTokens(model(), &log, &info);
  const std::vector<int32_t> want = GreedyTokens(reference(), &reference_log, &reference_info);
  ASSERT_EQ(tokens.size(), 12u) << log;
  EXPECT_EQ(tokens, want) << log;
  EXPECT_NE(log.find("Quantized: checkpoint " + GetParam().description), std::string::npos) << log;
  EXPECT_EQ(reference_log.find("Quantized:"), std::string::npos) << reference_log;
  // GetModelInfo says the same as the start log; the dequantized reference is not quantized.
  EXPECT_EQ(info.quantization().source(), "checkpoint");
  EXPECT_EQ(info.quantization().summary().rfind("checkpoint " + GetParam().description, 0), 0u)
      << info.quantization().summary();
  EXPECT_EQ(info.quantization().activations(), "float");
  EXPECT_EQ(info.quantization().summary().find("()"), std::string::npos)
      << info.quantization().summary();
  if (!GetParam().float_field.empty()) {
    EXPECT_NE(info.quantization().summary().find("left unquantized (" + GetParam().float_field),
              std::string::npos)
        << info.quantization().summary();
  }
  EXPECT_FALSE(reference_info.has_quantization()) << reference_info.DebugString();
  // Where the checkpoint quantizes its lm_head, the summary says it is held packed, not float.
  const std::string& summary = info.quantization().summary();
  EXPECT_EQ(summary.find("decoder-layer linear weights and the lm_head repacked") != std::string::npos,
            GetParam().lm_head)
      << summary;
  EXPECT_EQ(summary.find("biases and lm_head in") == std::string::npos, GetParam().lm_head) << summary;
}

uint64_t CpuWeights(const nlohmann::json& plan) {
  for (const auto& entry : plan.at("devices")) {
    if (entry.at("name") == "cpu") return entry.at("weights_bytes").get<uint64_t>();
  }
  return 0;
}

TEST_P(Prequantized, PlanSizesLinearWeightsInTheirPackedBytes) {
  const CommandResult plan = RunCommand(absl::StrCat(PLACER_CLI_PATH, " plan ", model(),
                                                     " --devices cpu=1GiB --max-seq-len 64 --max-batch-size 2 --format json"));
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const nlohmann::json json = nlohmann::json::parse(plan.output);
  const CommandResult reference_plan = RunCommand(absl::StrCat(
      PLACER_CLI_PATH, " plan ", reference(), " --devices cpu=1GiB --max-seq-len 64 --max-batch-size 2 --format json"));
  ASSERT_EQ(reference_plan.exit_code, 0) << reference_plan.output;
  // The reference holds the linear weights in F32; the quantized model holds them packed:
  // per row and group a float32 scale and offset and group_size codes of `bits` bits.
  uint64_t expected = CpuWeights(nlohmann::json::parse(reference_plan.output));
  const std::vector<std::tuple<std::string, int64_t, int64_t>> linear = {
      {"self_attn.q_proj", 128, 128}, {"self_attn.k_proj", 64, 128}, {"self_attn.v_proj", 64, 128},
      {"self_attn.o_proj", 128, 128}, {"mlp.gate_proj", 256, 128},    {"mlp.up_proj", 256, 128},
      {"mlp.down_proj", 128, 256}};
  for (const auto& [name, out, in] : linear) {
    if (GetParam().float_linears.count(name) > 0) continue;  // F32, as in the reference
    const auto other = GetParam().other_schemes.find(name);
    const auto [bits, group_size] = other != GetParam().other_schemes.end()
                                        ? other->second
                                        : std::make_pair(GetParam().bits, GetParam().group_size);
    const int64_t group = group_size == -1 ? in : group_size;
    const uint64_t packed = out * (in / group) * (8 + group * bits / 8);
    expected = expected - 2 * out * in * 4 + 2 * packed;
  }
  if (GetParam().lm_head) {
    const int64_t vocab = 304, in = 128, group = GetParam().group_size;
    expected = expected - vocab * in * 4 + vocab * (in / group) * (8 + group * GetParam().bits / 8);
  }
  EXPECT_EQ(CpuWeights(json), expected) << plan.output;
  EXPECT_NE(json.at("quantize").at("checkpoint").get<std::string>().find(GetParam().description),
            std::string::npos)
      << plan.output;
  if (!GetParam().float_field.empty()) {
    // A config that leaves one more linear unquantized than the tensors do: the plan says which
    // field made it so.
    const std::string config_path = model() + "/config.json";
    std::ifstream in(config_path);
    nlohmann::json config = nlohmann::json::parse(in);
    in.close();
    nlohmann::json& field =
        config["quantization_config"][GetParam().float_field.substr(GetParam().float_field.rfind('.') + 1)];
    field.push_back("model.layers.0.mlp.up_proj");
    std::ofstream(config_path) << config.dump();
    const CommandResult mismatched = RunCommand(absl::StrCat(PLACER_CLI_PATH, " plan ", model()));
    EXPECT_NE(mismatched.exit_code, 0);
    EXPECT_NE(mismatched.output.find("leaves model.layers.0.mlp.up_proj unquantized (" +
                                     GetParam().float_field),
              std::string::npos)
        << mismatched.output;
  }
  const CommandResult refused =
      RunCommand(absl::StrCat(PLACER_CLI_PATH, " plan ", model(), " --quantize int8"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("already quantized"), std::string::npos) << refused.output;
}

// --quantize-lm-head on a checkpoint that leaves its lm_head in float: planned and held packed
// (int8, one scale per output), said so in the plan and GetModelInfo, and the greedy tokens of
// the dequantized reference served with the same flag. Where the checkpoint quantizes its head
// itself, the flag is refused naming it.
TEST_P(Prequantized, QuantizeLmHeadPacksAFloatHeadAtLoad) {
  const std::string plan_args = " --devices cpu=1GiB --max-seq-len 64 --max-batch-size 2 --format json";
  const CommandResult with_head = RunCommand(
      absl::StrCat(PLACER_CLI_PATH, " plan ", model(), plan_args, " --quantize-lm-head int8"));
  if (GetParam().lm_head) {
    EXPECT_NE(with_head.exit_code, 0);
    EXPECT_NE(with_head.output.find("already quantizes its lm_head"), std::string::npos)
        << with_head.output;
    EXPECT_NE(with_head.output.find("drop --quantize-lm-head"), std::string::npos) << with_head.output;
    return;
  }
  ASSERT_EQ(with_head.exit_code, 0) << with_head.output;
  const CommandResult without = RunCommand(absl::StrCat(PLACER_CLI_PATH, " plan ", model(), plan_args));
  ASSERT_EQ(without.exit_code, 0) << without.output;
  const nlohmann::json json = nlohmann::json::parse(with_head.output);
  // lm_head [300, 128]: F32 300 x 128 x 4 bytes; int8 300 x (8 + 128).
  EXPECT_EQ(CpuWeights(nlohmann::json::parse(without.output)) - CpuWeights(json),
            300u * 128 * 4 - 300u * (8 + 128))
      << with_head.output;
  EXPECT_EQ(json.at("quantize").at("lm_head"), "int8") << with_head.output;
  EXPECT_EQ(json.at("quantize").at("covers"), "decoder-layer linear weights and the lm_head");
  const std::string summary = json.at("quantize").at("summary").get<std::string>();
  EXPECT_NE(summary.find("; lm_head packed at load, int8 (one scale per output channel), by "
                         "--quantize-lm-head"),
            std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("biases and lm_head in"), std::string::npos) << summary;

  std::string log, reference_log;
  v1::ModelInfo info, reference_info;
  const std::vector<std::string> flag = {"--quantize-lm-head", "int8"};
  const std::vector<int32_t> tokens = GreedyTokens(model(), &log, &info, flag);
  const std::vector<int32_t> want = GreedyTokens(reference(), &reference_log, &reference_info, flag);
  ASSERT_EQ(tokens.size(), 12u) << log;
  EXPECT_EQ(tokens, want) << log;
  EXPECT_EQ(info.quantization().source(), "checkpoint");
  EXPECT_EQ(info.quantization().summary(), summary);
  // The unquantized reference with the flag: the head alone is packed, and said so.
  EXPECT_EQ(reference_info.quantization().source(), "--quantize-lm-head");
  EXPECT_EQ(reference_info.quantization().summary().rfind(
                "--quantize-lm-head int8 (one scale per output channel): lm_head sized and held "
                "packed",
                0),
            0u)
      << reference_info.quantization().summary();
}

INSTANTIATE_TEST_SUITE_P(
    Formats, Prequantized,
    ::testing::Values(Format{"gptq", "gptq 4 32", "GPTQ 4-bit (groups of 32, asym, v1)", 4, 32},
                      Format{"gptq_act_order", "gptq 4 32 --act-order",
                             "GPTQ 4-bit (groups of 32, asym, desc_act, v1)", 4, 32},
                      Format{"awq", "awq 4 64", "AWQ GEMM 4-bit (groups of 64)", 4, 64},
                      Format{"compressed_tensors_pack", "ct-pack 4 32",
                             "compressed-tensors pack-quantized 4-bit (groups of 32, asymmetric)", 4, 32},
                      Format{"compressed_tensors_int8", "ct-int 8 -1 --sym",
                             "compressed-tensors int-quantized 8-bit (one scale per output channel; "
                             "activations kept in the compute dtype)", 8, -1},
                      Format{"compressed_tensors_ignore",
                             "ct-pack 4 32 --float-modules=mlp.down_proj,self_attn.o_proj",
                             "compressed-tensors pack-quantized 4-bit (groups of 32, asymmetric)", 4, 32,
                             {"mlp.down_proj", "self_attn.o_proj"}, "quantization_config.ignore"},
                      Format{"gptq_lm_head", "gptq 4 32 --lm-head",
                             "GPTQ 4-bit (groups of 32, asym, v1, lm_head)", 4, 32, {}, "", true},
                      Format{"awq_not_converted", "awq 4 64 --float-modules=mlp.gate_proj",
                             "AWQ GEMM 4-bit (groups of 64)", 4, 64, {"mlp.gate_proj"},
                             "quantization_config.modules_to_not_convert"},
                      Format{"gptq_dynamic_override", "gptq 4 32 '--gptq-override=.*mlp\\.up_proj:8:64'",
                             "GPTQ 4-bit (groups of 32, asym, v1); dynamic +:.*mlp\\.up_proj 8-bit "
                             "(groups of 64, asym, v1)", 4, 32, {}, "", false,
                             {{"mlp.up_proj", {8, 64}}}},
                      // llm-compressor's mixed schemes: W8A8 attention by a pattern, 4-bit
                      // groups for the other linears ("Linear"), one linear ignored.
                      Format{"compressed_tensors_mixed_groups",
                             "ct-mixed 4 32 --float-modules=mlp.down_proj",
                             "compressed-tensors config groups: attention int-quantized 8-bit (one "
                             "scale per output channel; activations kept in the compute dtype) for "
                             "[\"re:.*self_attn\\\\.(q|k|v)_proj$\"]; rest pack-quantized 4-bit "
                             "(groups of 32, asymmetric) for [\"Linear\"]",
                             4, 32, {"mlp.down_proj"}, "quantization_config.ignore", false,
                             {{"self_attn.q_proj", {8, -1}}, {"self_attn.k_proj", {8, -1}},
                              {"self_attn.v_proj", {8, -1}}}}),
    [](const ::testing::TestParamInfo<Format>& info) { return info.param.name; });

}  // namespace
}  // namespace placer::testing
