// The bench tools against real processes and files: the numbers bench/run reports are only
// worth something if placer and its PyTorch peer compute the same thing, the offload layouts
// really stage what they claim, and the gRPC bench sees the tokens the model produces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;

class BenchTools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / absl::StrCat("placer-bench-tools-", getpid()));
    fs::remove_all(*dir_);
    const CommandResult made = RunCommand(absl::StrCat(
        PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir_->string(), " --arch llama --preset tiny --seed 3"));
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  // Runs a tool that prints one JSON object; fails the test with its output otherwise.
  static nlohmann::json Json(const std::string& command_line) {
    const CommandResult result = RunCommand(command_line);
    EXPECT_EQ(result.exit_code, 0) << command_line << "\n" << result.output;
    // Only the last line is the JSON (python or libtorch may warn before it).
    const size_t begin = result.output.rfind("\n{");
    const std::string text = result.output.substr(begin == std::string::npos ? 0 : begin + 1);
    auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << command_line << "\n" << result.output;
    return parsed;
  }

  static std::string Decode(const std::string& layout, const std::string& extra = "") {
    return absl::StrCat(PLACER_BENCH_MODEL_PATH, " decode ", dir_->string(), " --layout ", layout,
                        " --threads 1 --prompt-tokens 8 --new-tokens 6 --runs 1 ", extra);
  }

  static fs::path* dir_;
};

fs::path* BenchTools::dir_ = nullptr;

TEST_F(BenchTools, PlacerAndThePyTorchPeerDecodeTheSameGreedyTokens) {
  const nlohmann::json ours = Json(Decode("cpu"));
  const nlohmann::json peer = Json(absl::StrCat(
      "/usr/bin/python3 ", PLACER_SOURCE_DIR, "/bench/peers/torch_eager_decode.py ", dir_->string(),
      " --threads 1 --prompt-tokens 8 --new-tokens 6 --runs 1"));
  ASSERT_EQ(ours["runs"].size(), 1u);
  ASSERT_EQ(peer["runs"].size(), 1u);
  EXPECT_EQ(ours["runs"][0]["tokens"].size(), 6u);
  EXPECT_EQ(ours["runs"][0]["step_seconds"].size(), 5u);
  EXPECT_EQ(ours["runs"][0]["tokens"], peer["runs"][0]["tokens"]);
  EXPECT_EQ(ours["step_seconds"]["count"], 5);
  EXPECT_FALSE(ours["blas"].get<std::string>().empty());
  EXPECT_FALSE(peer["blas"].empty());
}

TEST_F(BenchTools, OffloadLayoutsStageTheBytesTheyOffload) {
  const nlohmann::json resident = Json(Decode("gpu"));
  const nlohmann::json all = Json(Decode("all-disk"));
  const nlohmann::json half = Json(Decode("half-cpu", "--no-prefetch"));
  const double weights = all["weight_bytes"].get<double>();
  std::ifstream config_file(*dir_ / "config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  const double hidden_row = config["hidden_size"].get<double>() * 4;  // F32
  const double embedding = config["vocab_size"].get<double>() * hidden_row;
  // The 8-byte token id entering the first block is counted with the staged weights.
  EXPECT_LE(resident["runs"][0]["staged_bytes_per_token"].get<double>(), 8);
  // Fully offloaded: every weight is copied onto the execution device for every token but
  // the embedding's, which is looked up in host memory: its one row arrives as the hidden state.
  EXPECT_NEAR(all["runs"][0]["staged_bytes_per_token"].get<double>(),
              weights - embedding + hidden_row, 8);
  const double staged_half = half["runs"][0]["staged_bytes_per_token"].get<double>();
  EXPECT_GT(staged_half, 0.2 * weights);
  EXPECT_LT(staged_half, 0.8 * weights);
  EXPECT_FALSE(half["prefetch"].get<bool>());
  // Where the weights live changes nothing about the answer.
  EXPECT_EQ(all["runs"][0]["tokens"], resident["runs"][0]["tokens"]);
  EXPECT_EQ(half["runs"][0]["tokens"], resident["runs"][0]["tokens"]);
}

TEST_F(BenchTools, BandwidthMeasuresTheStagingCopyBesideLibtorchs) {
  const nlohmann::json bandwidth =
      Json(absl::StrCat(PLACER_BENCH_MODEL_PATH, " bandwidth --threads 1 --mib 4 --runs 2"));
  if (bandwidth.is_discarded()) return;
  EXPECT_EQ(bandwidth["bytes"], 4 << 20);
  // The offload floor's transfer term comes from "staging_copy".
  for (const char* way : {"copy", "staging_copy", "clone", "read"}) {
    ASSERT_TRUE(bandwidth.contains(way)) << way;
    EXPECT_EQ(bandwidth[way]["seconds"].size(), 2u) << way;
    EXPECT_GT(bandwidth[way]["bytes_per_second"].get<double>(), 0) << way;
    // The floors take the fastest pass: at least the median's rate, from the fastest sample.
    const double fastest = std::min(bandwidth[way]["seconds"][0].get<double>(),
                                    bandwidth[way]["seconds"][1].get<double>());
    EXPECT_DOUBLE_EQ(bandwidth[way]["best_bytes_per_second"].get<double>(), (4 << 20) / fastest)
        << way;
    EXPECT_GE(bandwidth[way]["best_bytes_per_second"].get<double>(),
              bandwidth[way]["bytes_per_second"].get<double>()) << way;
  }
}

TEST_F(BenchTools, ReadProbesGiveEveryDecodeStepItsOwnReadBandwidth) {
  const nlohmann::json probed = Json(Decode("cpu", "--read-probe-mib 2"));
  if (probed.is_discarded()) return;
  EXPECT_EQ(probed["read_probe_bytes"], 2 << 20);
  const nlohmann::json& run = probed["runs"][0];
  EXPECT_EQ(run["step_seconds"].size(), 5u);  // 6 new tokens: the first comes from the prompt
  // After every other step (a probed step never follows a probe): steps 1 and 3.
  ASSERT_EQ(run["read_probes"].size(), 2u);
  EXPECT_EQ(run["read_probes"][0]["step"], 1);
  EXPECT_EQ(run["read_probes"][1]["step"], 3);
  for (const auto& probe : run["read_probes"]) EXPECT_GT(probe["bytes_per_second"].get<double>(), 0);
  EXPECT_EQ(probed["read_probe_bytes_per_second"]["count"], 2);
  // The probes run between steps, outside them: the tokens are those of a run without.
  EXPECT_EQ(run["tokens"], Json(Decode("cpu"))["runs"][0]["tokens"]);
  // Without probes the report has none (bench/sections_model.py then takes the section's
  // fastest read).
  EXPECT_FALSE(Json(Decode("cpu"))["runs"][0].contains("read_probes"));
  const CommandResult batched = RunCommand(Decode("cpu", "--batch 2 --read-probe-mib 2"));
  EXPECT_NE(batched.exit_code, 0);
  EXPECT_NE(batched.output.find("--read-probe-mib times batch-1 steps only"), std::string::npos)
      << batched.output;
}

TEST_F(BenchTools, ProductsTimesEveryRowCountEachWay) {
  const nlohmann::json products =
      Json(absl::StrCat(PLACER_BENCH_MODEL_PATH, " products --threads 1 --runs 1"));
  if (products.is_discarded()) return;
  ASSERT_EQ(products["points"].size(), 9u) << products.dump();  // 1, 2, 4, ... 256 rows
  // 8 layers of q, k, v, o, gate, up, down and the 32000 x 768 lm_head, in F32.
  EXPECT_EQ(products["weight_bytes_per_pass"], int64_t{299630592});
  EXPECT_EQ(products["aten_bf16_gemm_vectorized"], products["bf16_isa"] != "avx2");
  int64_t previous_rows = 0;
  for (const nlohmann::json& point : products["points"]) {
    EXPECT_GT(point["rows"].get<int64_t>(), previous_rows);
    previous_rows = point["rows"].get<int64_t>();
    for (const char* way : {"placer", "sgemm"}) {
      EXPECT_GT(point["out_in_ms"][way].get<double>(), 0) << way << " at " << previous_rows;
    }
    // The prompt-chunk kernel: it runs wherever the tool does (AVX-512, or AVX2 alone).
    ASSERT_TRUE(point["out_in_ms"].contains("prompt_chunk")) << previous_rows;
    EXPECT_GT(point["out_in_ms"]["prompt_chunk"].get<double>(), 0) << previous_rows;
    // One gemv per row only where it could compete.
    EXPECT_EQ(point["out_in_ms"].contains("gemv_per_row"), previous_rows <= 64) << previous_rows;
    if (previous_rows <= 64) {
      EXPECT_GT(point["out_in_ms"]["gemv_per_row"].get<double>(), 0);
    }
    // ATen's BF16 GEMM wherever it is vectorized (AVX-512; a scalar loop on AVX2 alone).
    EXPECT_EQ(point["bf16_out_in_ms"].contains("aten"), products["bf16_isa"] != "avx2") << previous_rows;
    if (products["bf16_isa"] != "avx2") {
      EXPECT_GT(point["bf16_out_in_ms"]["aten"].get<double>(), 0) << previous_rows;
    }
    // Every BF16 path this CPU runs (at least AVX2's, as the products need AVX2).
    ASSERT_FALSE(products["bf16_isas"].empty());
    for (const nlohmann::json& isa : products["bf16_isas"]) {
      EXPECT_GT(point["bf16_out_in_ms"][isa.get<std::string>()].get<double>(), 0)
          << isa << " at " << previous_rows;
    }
    for (const char* way : {"placer", "sgemm"}) {
      EXPECT_GT(point["in_out_ms"][way].get<double>(), 0) << way << " at " << previous_rows;
    }
  }
}

TEST_F(BenchTools, ProductsMeasureTheAvx2KernelsWhenAsked) {
  const nlohmann::json products =
      Json(absl::StrCat(PLACER_BENCH_MODEL_PATH, " products --threads 1 --runs 1 --avx2"));
  if (products.is_discarded()) return;
  EXPECT_EQ(products["isa"], "avx2");
  EXPECT_EQ(products["placer_max_rows"]["out_in"], 16);
}

TEST_F(BenchTools, QuantizedProductsTimeEverySchemeAndIsa) {
  const nlohmann::json products =
      Json(absl::StrCat(PLACER_BENCH_MODEL_PATH, " quantized-products --threads 1 --runs 1"));
  if (products.is_discarded()) return;
  ASSERT_EQ(products["points"].size(), 8u) << products.dump();  // 1, 2, 4, ... 128 rows
  // 8 layers of q, k, v, o, gate, up, down in BF16; int4 packs g inputs in 8 + g / 2 bytes.
  const int64_t elements = 8 * (2 * 768 * 768 + 2 * 256 * 768 + 3 * 2048 * 768);
  EXPECT_EQ(products["bytes_per_pass"]["bf16"], elements * 2);
  EXPECT_EQ(products["bytes_per_pass"]["int4_g128"], elements / 128 * (8 + 64));
  EXPECT_EQ(products["bytes_per_pass"]["int4_g32"], elements / 32 * (8 + 16));
  ASSERT_FALSE(products["isas"].empty());
  EXPECT_EQ(products["aten_bf16_gemm_vectorized"], products["bf16_isa"] != "avx2");
  const std::string best = products["isas"][0].get<std::string>();
  for (const nlohmann::json& point : products["points"]) {
    EXPECT_GT(point["bf16_ms"]["placer"].get<double>(), 0);
    EXPECT_GT(point["bf16_ms"]["widened_sgemm"].get<double>(), 0);
    // ATen's BF16 GEMM wherever it is vectorized (AVX-512; a scalar loop on AVX2 alone).
    EXPECT_EQ(point["bf16_ms"].contains("aten"), products["bf16_isa"] != "avx2");
    if (products["bf16_isa"] != "avx2") {
      EXPECT_GT(point["bf16_ms"]["aten"].get<double>(), 0);
    }
    for (const std::string scheme : {"int8", "int4_g32", "int4_g128"}) {
      const nlohmann::json& bf16_rows = point[scheme + "_ms"];
      EXPECT_GT(bf16_rows["unpack_" + best + "_gemm"].get<double>(), 0) << scheme;
      EXPECT_GT(bf16_rows["unpack_none_gemm"].get<double>(), 0) << scheme;
      for (const nlohmann::json& isa : products["isas"]) {
        EXPECT_GT(bf16_rows[isa.get<std::string>()].get<double>(), 0) << scheme << " " << isa;
      }
      const nlohmann::json& f32_rows = point[scheme + "_f32_ms"];
      EXPECT_GT(f32_rows[best].get<double>(), 0) << scheme;
      EXPECT_GT(f32_rows["unpack_gemm"].get<double>(), 0) << scheme;
      EXPECT_GT(f32_rows["unpacked_quantized_linear"].get<double>(), 0) << scheme;
      // On a VNNI CPU every scheme here (int8 per channel, int4 in groups of 32 and 128) has
      // the int8-activation column too.
      if (point["int4_g128_f32_ms"].contains("int8_activations")) {
        EXPECT_GT(f32_rows["int8_activations"].get<double>(), 0) << scheme;
      }
      // The three-digit kernel's column wherever QuantizedLinear gives it these rows: 4-bit
      // groups of 128s, float32 rows on AVX512-VNNI and on AVX2 alone, BF16 rows there too.
      const bool digits_here = scheme == "int4_g128" && (__builtin_cpu_supports("avx512vnni") ||
                                                         !__builtin_cpu_supports("avx512f"));
      EXPECT_EQ(f32_rows.contains("int4_digits"), digits_here) << scheme;
      EXPECT_EQ(bf16_rows.contains("int4_digits"),
                digits_here && !__builtin_cpu_supports("avx512f"))
          << scheme;
      // Where the kernels hand over: never below a decode step of 16 rows.
      EXPECT_GE(products["max_rows"][scheme]["f32"].get<int64_t>(), 16) << scheme;
      EXPECT_GE(products["max_rows"][scheme]["bf16"].get<int64_t>(), 16) << scheme;
    }
  }
}

TEST_F(BenchTools, InterleavedRowsChecksItsKernelsAndTimesEveryLayout) {
  const std::string command =
      absl::StrCat(PLACER_BENCH_MODEL_PATH, " interleaved-rows --threads 1 --mib 1 --passes 2");
  if (!__builtin_cpu_supports("avx512bf16")) {
    const CommandResult refused = RunCommand(command);
    EXPECT_NE(refused.exit_code, 0) << refused.output;
    EXPECT_NE(refused.output.find("AVX512-BF16"), std::string::npos) << refused.output;
    return;
  }
  const nlohmann::json rows = Json(command);
  if (rows.is_discarded()) return;
  // --mib 1: one whole layer of TinyLlama's shapes, 72 bytes a block of 128.
  EXPECT_EQ(rows["bytes"], (2 * 2048 * 2048 + 2 * 256 * 2048 + 3 * 5632 * 2048) / 128 * 72);
  // Each kernel matched float64 before anything was timed (the tool throws otherwise).
  EXPECT_LT(rows["largest_relative_error"].get<double>(), 1e-4) << rows.dump();
  for (const char* name : {"sum", "1_row", "2_rows_interleaved", "4_rows_interleaved"}) {
    ASSERT_TRUE(rows["variants"].contains(name)) << name << " " << rows.dump();
    EXPECT_GT(rows["variants"][name]["gbps"].get<double>(), 0) << name;
    EXPECT_GT(rows["variants"][name]["of_sum"]["p25"].get<double>(), 0) << name;
  }
  EXPECT_DOUBLE_EQ(rows["variants"]["sum"]["of_sum"]["median"].get<double>(), 1.0);
}

TEST_F(BenchTools, PackedStreamGivesEverySchemeItsShareOfTheRead) {
  // --mib 1: one whole layer of TinyLlama's shapes per scheme.
  const nlohmann::json stream = Json(
      absl::StrCat(PLACER_BENCH_MODEL_PATH, " packed-stream --threads 1 --mib 1 --passes 3"));
  if (stream.is_discarded()) return;
  const int64_t elements = 2 * 2048 * 2048 + 2 * 256 * 2048 + 3 * 5632 * 2048;
  const nlohmann::json& schemes = stream["schemes"];
  ASSERT_TRUE(schemes.contains("int4") && schemes.contains("int8")) << stream.dump();
  EXPECT_EQ(schemes["int4"]["bytes"], elements / 128 * (8 + 64));
  // Per channel: each output row's 8-byte header and its inputs.
  EXPECT_EQ(schemes["int8"]["bytes"], (2 * 2048 + 2 * 256 + 2 * 5632) * (8 + 2048) + 2048 * (8 + 5632));
  for (const auto& [name, scheme] : schemes.items()) {
    EXPECT_GT(scheme["pass_ms"].get<double>(), 0) << name;
    EXPECT_GT(scheme["read_gbps"].get<double>(), 0) << name;
    EXPECT_NEAR(scheme["kernel_gbps"].get<double>(),
                scheme["bytes"].get<double>() / scheme["pass_ms"].get<double>() / 1e6, 1e-6) << name;
    EXPECT_LE(scheme["of_read"]["p25"].get<double>(), scheme["of_read"]["median"].get<double>()) << name;
    EXPECT_LE(scheme["of_read"]["median"].get<double>(), scheme["of_read"]["p75"].get<double>()) << name;
    EXPECT_GT(scheme["of_read"]["p25"].get<double>(), 0) << name;
  }
  // The int8-activation schemes exactly where their kernel runs (AVX512-VNNI or AVX-VNNI).
  EXPECT_EQ(schemes.contains("int4a8"), schemes.contains("int8a8")) << stream.dump();
}

TEST_F(BenchTools, DriftComparesTheQuantizedModelWithTheUnquantizedOne) {
  double kl[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const char* scheme = i == 0 ? "int8" : "int4";
    SCOPED_TRACE(scheme);
    const nlohmann::json report = Json(absl::StrCat(PLACER_BENCH_MODEL_PATH, " drift ",
                                                    dir_->string(), " --threads 1 --quantize ",
                                                    scheme, " --prompts 3 --tokens 5",
                                                    // the tiny preset's 352 inputs of down_proj
                                                    i == 0 ? "" : " --quantize-group-size 32"));
    if (report.is_discarded()) return;
    EXPECT_EQ(report["quantize"], scheme);
    const nlohmann::json& drift = report["drift"];
    EXPECT_EQ(drift["positions"], 15);
    ASSERT_EQ(drift["per_prompt"].size(), 3u);
    const double agreement = drift["top1_agreement"].get<double>();
    EXPECT_GE(agreement, 0.0);
    EXPECT_LE(agreement, 1.0);
    kl[i] = drift["mean_kl"].get<double>();
    // The quantized weights differ from the float ones, so the distributions do too.
    EXPECT_GT(kl[i], 0.0);
    EXPECT_GE(drift["max_kl"].get<double>(), kl[i]);
  }
  // 16 levels per group against 255 per channel: int4 moves the distributions further.
  EXPECT_GT(kl[1], kl[0]);
  const CommandResult unquantized = RunCommand(absl::StrCat(
      PLACER_BENCH_MODEL_PATH, " drift ", dir_->string(), " --threads 1 --quantize none"));
  EXPECT_EQ(unquantized.exit_code, 1);
  EXPECT_NE(unquantized.output.find("--quantize int8|int4 is required"), std::string::npos)
      << unquantized.output;
}

TEST_F(BenchTools, DecodeCountsTheQuantizedWeightsReadPerTokenInTheirPackedBytes) {
  const nlohmann::json plain = Json(Decode("cpu"));
  const nlohmann::json packed = Json(Decode("cpu", "--quantize int4 --quantize-group-size 32"));
  if (plain.is_discarded() || packed.is_discarded()) return;
  // The tiny preset's 4 layers: q, o [128, 128], k, v [64, 128], gate, up [352, 128],
  // down [128, 352], F32; int4 in groups of 32 packs 32 inputs in 8 + 16 bytes.
  const int64_t outputs_times_inputs = 2 * 128 * 128 + 2 * 64 * 128 + 3 * 352 * 128;
  const int64_t f32_bytes = 4 * outputs_times_inputs * 4;
  const int64_t packed_bytes = 4 * outputs_times_inputs / 32 * (8 + 16);
  EXPECT_EQ(packed["decode_read_bytes_per_token"].get<int64_t>(),
            plain["decode_read_bytes_per_token"].get<int64_t>() - f32_bytes + packed_bytes);
}

TEST_F(BenchTools, DecodeComputesInTheDtypeThatPlacerdWouldAndCountsItsBytes) {
  // --dtype auto on this F32 checkpoint is F32; BF16 binds every float weight in 2 bytes.
  const nlohmann::json automatic = Json(Decode("cpu"));
  const nlohmann::json bf16 = Json(Decode("cpu", "--dtype BF16"));
  if (automatic.is_discarded() || bf16.is_discarded()) return;
  EXPECT_EQ(automatic["compute_dtype"], "F32");
  EXPECT_EQ(bf16["compute_dtype"], "BF16");
  EXPECT_EQ(bf16["decode_read_bytes_per_token"].get<int64_t>() * 2,
            automatic["decode_read_bytes_per_token"].get<int64_t>());
  EXPECT_EQ(bf16["runs"][0]["tokens"].size(), 6u);
  const CommandResult bad = RunCommand(Decode("cpu", "--dtype F8"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("--dtype 'F8'"), std::string::npos) << bad.output;
}

TEST_F(BenchTools, BadArgumentsAreNamed) {
  CommandResult result = RunCommand(Decode("sideways"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("--layout sideways"), std::string::npos) << result.output;
  result = RunCommand(absl::StrCat(PLACER_BENCH_MODEL_PATH, " decode ", dir_->string(),
                                   "-missing --runs 1"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("-missing"), std::string::npos) << result.output;
  result = RunCommand(absl::StrCat(PLACER_BENCH_GRPC_PATH, " generate --target 127.0.0.1:1"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--vocab"), std::string::npos) << result.output;
}

TEST_F(BenchTools, GrpcBenchTimesARealDaemonAndSeesItsTokens) {
  const int port = FreeLoopbackPort();
  const nlohmann::json ready = Json(absl::StrCat(
      PLACER_BENCH_GRPC_PATH, " ready --target 127.0.0.1:", port, " --vocab 2048 --log ",
      dir_->string(), "-ready.log -- ", PLACERD_PATH, " --listen 127.0.0.1:", port,
      " --metrics-listen '' --threads 1 --model ", dir_->string()));
  EXPECT_GT(ready["ready_seconds"].get<double>(), 0);
  EXPECT_GT(ready["peak_rss_bytes_at_ready"].get<int64_t>(), 0);
  EXPECT_GT(ready["logged_load_seconds"].get<double>(), 0);
  EXPECT_EQ(ready["exit_status"], 0);
  fs::remove(dir_->string() + "-ready.log");

  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_->string(), "--threads", "1"}));
  ASSERT_TRUE(WaitServing(ports, std::chrono::seconds(60))) << daemon.Log();
  const nlohmann::json streams = Json(absl::StrCat(
      PLACER_BENCH_GRPC_PATH, " generate --target ", ports.target(),
      " --vocab 2048 --streams 3 --prompt-tokens 8 --new-tokens 6"));
  EXPECT_EQ(streams["completion_tokens"], 18);
  EXPECT_EQ(streams["ttft_seconds"].size(), 3u);
  EXPECT_GT(streams["aggregate_tokens_per_second"].get<double>(), 0);
  // Stream 0 of variant 0 sends the prompt the in-process decode bench uses.
  const nlohmann::json local = Json(Decode("cpu"));
  EXPECT_EQ(streams["tokens"][0], local["runs"][0]["tokens"]);
  // --batch 3 steps stream s's prompt as sequence s, all in one batch: the daemon's tokens.
  const nlohmann::json batched = Json(Decode("cpu", "--batch 3"));
  EXPECT_EQ(batched["batch"], 3);
  ASSERT_EQ(batched["runs"].size(), 1u);
  EXPECT_EQ(batched["runs"][0]["step_seconds"].size(), 5u);
  EXPECT_EQ(batched["step_seconds"]["count"], 5);
  EXPECT_EQ(batched["runs"][0]["tokens"], streams["tokens"]);
  const nlohmann::json unary = Json(absl::StrCat(
      PLACER_BENCH_GRPC_PATH, " forward --target ", ports.target(),
      " --vocab 2048 --tokens 4 --iterations 20 --clients 2"));
  EXPECT_EQ(unary["latency"]["count"], 40);
}

}  // namespace
}  // namespace placer::testing
