// placer-bench-model: in-process measurements of placer's model API (no gRPC), one JSON
// object on stdout per invocation. bench/run drives it; see bench/README.md.
//
//   placer-bench-model decode DIR [--layout L] [--threads 2] [--prompt-tokens 64]
//                                  [--new-tokens 32] [--runs 3] [--no-prefetch]
//                                  [--read-probe-mib 64]
//   placer-bench-model forward DIR [--threads 2] [--tokens 8] [--iterations 300] [--clients 1]
//   placer-bench-model bandwidth [--mib 256] [--threads 2] [--runs 5]
//   placer-bench-model drift DIR --quantize int8|int4 [--prompts 8] [--tokens 32] [--threads 2]
//   placer-bench-model stream-prefetch [--mib 256] [--threads 2] [--pairs 100] [--distances ...]
//   placer-bench-model packed-stream [--mib 256] [--threads 2] [--passes 20] [--shapes small] [--float32-rows]
#include <ATen/ATen.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "bench/bench_common.h"
#include "bench/batched_decode.h"
#include "bench/bench_layouts.h"
#include "bench/loaded_model.h"
#include "bench/memory_bandwidth.h"
#include "bench/quantize_drift.h"
#include "bench/packed_stream.h"
#include "bench/quantized_products.h"
#include "bench/interleaved_rows.h"
#include "bench/loop_handoff.h"
#include "bench/sampling_bench.h"
#include "bench/small_batch_products.h"
#include "bench/stream_prefetch.h"
#include "model/causal_lm.h"
#include "model/logit_passes.h"
#include "base/malloc_reuse.h"
#include "base/openblas_core.h"
#include "base/status_macros.h"

namespace placer::bench {
namespace {

// Each pass ends with the stager running ahead into the next pass's first blocks until the
// staging slots are full; waiting (untimed) for it before reading the counters puts their
// bytes in the window of the pass that started them, so a window of n passes counts exactly
// n passes' staging.
void SettlePrefetch() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

// The greedy token as placerd's sampler picks it (one vectorized pass, not std::max_element's
// ~95 us over 32000 logits, which llama-bench's timed steps do not pay either).
int32_t Argmax(const model::Logits& logits) {
  const float* values = logits.values.data();
  const auto n = static_cast<int64_t>(logits.values.size());
  return static_cast<int32_t>(model::FirstIndexOf(values, n, model::LargestLogit(values, n)));
}

// Greedy decode: prefill the prompt, then one Extend per new token, each timed (or, with
// --batch, several sequences stepped together: MeasureBatchedDecode).
absl::StatusOr<nlohmann::json> Decode(const ModelArgs& args, int prompt_tokens, int new_tokens,
                                      int runs, int batch, int read_probe_mib) {
  if (batch > 1 && read_probe_mib > 0) {
    return absl::InvalidArgumentError("--read-probe-mib times batch-1 steps only (no --batch)");
  }
  PLACER_ASSIGN_OR_RETURN(auto loaded, Load(args));
  const model::CausalLm& lm = *loaded.model;
  if (batch > 1) {
    PLACER_ASSIGN_OR_RETURN(nlohmann::json batched,
                            MeasureBatchedDecode(lm, batch, prompt_tokens, new_tokens, runs));
    batched.update(BaseReport(args, loaded));
    return batched;
  }
  const std::vector<int32_t> prompt = PromptTokens(prompt_tokens, lm.vocab_size());
  nlohmann::json samples = nlohmann::json::array();
  std::vector<double> prefill_all, step_all, probe_all;
  std::optional<ReadProbe> probe;
  if (read_probe_mib > 0) probe.emplace(int64_t{read_probe_mib} << 20);
  // Run 0 warms up (thread pool, first touch of every weight page, staging buffers) with a
  // few tokens and is not counted.
  for (int run = 0; run <= runs; ++run) {
    const int generate = run == 0 ? std::min(new_tokens, 3) : new_tokens;
    PLACER_ASSIGN_OR_RETURN(auto sequence, lm.NewSequence(prompt_tokens + new_tokens));
    const double wait_start = loaded.accounting->Figures().offload_wait_seconds;
    Clock::time_point start = Clock::now();
    auto logits = lm.Extend(*sequence, prompt);
    if (!logits.ok()) return logits.status();
    const double prefill = Seconds(start, Clock::now());
    std::vector<int32_t> tokens{Argmax(*logits)};
    SettlePrefetch();
    const uint64_t staged_start = StagedBytes(*loaded.accounting);
    const double wait_decode_start = loaded.accounting->Figures().offload_wait_seconds;
    std::vector<double> steps;
    nlohmann::json probes = nlohmann::json::array();
    for (int i = 1; i < generate; ++i) {
      start = Clock::now();
      logits = lm.Extend(*sequence, {tokens.back()});
      if (!logits.ok()) return logits.status();
      tokens.push_back(Argmax(*logits));
      steps.push_back(Seconds(start, Clock::now()));
      // After every other step: a probe evicts the L3, whose share of a small model's weights
      // the next step then reads from memory (0.3-1.3 ms more of a 5 ms small BF16 step), so
      // each probed step follows one without a probe.
      if (probe && run > 0 && steps.size() % 2 == 0) {
        const double bytes_per_second = probe->BytesPerSecond();
        probe_all.push_back(bytes_per_second);
        probes.push_back({{"step", steps.size() - 1}, {"bytes_per_second", bytes_per_second}});
      }
    }
    SettlePrefetch();
    const auto decode_steps = static_cast<double>(std::max(generate - 1, 1));
    const double wait_end = loaded.accounting->Figures().offload_wait_seconds;
    if (run == 0) continue;
    prefill_all.push_back(prefill);
    step_all.insert(step_all.end(), steps.begin(), steps.end());
    nlohmann::json sample =
        {{"prefill_seconds", prefill},
         {"step_seconds", steps},
         {"tokens", tokens},
         {"staged_bytes_per_token",
          static_cast<double>(StagedBytes(*loaded.accounting) - staged_start) / decode_steps},
         {"offload_wait_seconds_prefill", wait_decode_start - wait_start},
         {"offload_wait_seconds_per_token", (wait_end - wait_decode_start) / decode_steps}};
    // Probed steps' own floors: the read bandwidth right after them (ReadProbe); "step"
    // indexes step_seconds.
    if (probe) sample["read_probes"] = probes;
    samples.push_back(std::move(sample));
  }
  nlohmann::json report = BaseReport(args, loaded);
  report["prompt_tokens"] = prompt_tokens;
  report["new_tokens"] = new_tokens;
  report["runs"] = samples;
  report["prefill_seconds"] = Summary(prefill_all);
  report["step_seconds"] = Summary(step_all);
  if (probe) {
    report["read_probe_bytes"] = probe->bytes();
    report["read_probe_bytes_per_second"] = Summary(probe_all);
  }
  return report;
}

// Forward latency (one client) or throughput (several threads calling at once).
absl::StatusOr<nlohmann::json> ForwardCalls(const ModelArgs& args, int tokens, int iterations,
                                            int clients) {
  PLACER_ASSIGN_OR_RETURN(auto loaded, Load(args));
  const model::CausalLm& lm = *loaded.model;
  const std::vector<int32_t> ids = PromptTokens(tokens, lm.vocab_size());
  for (int i = 0; i < std::max(10, iterations / 20); ++i) {
    if (auto warm = lm.Forward(ids, false); !warm.ok()) return warm.status();
  }
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::vector<absl::Status> errors(static_cast<size_t>(clients));
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < iterations; ++i) {
        const Clock::time_point call = Clock::now();
        auto logits = lm.Forward(ids, false);
        if (!logits.ok()) {
          errors[static_cast<size_t>(c)] = logits.status();
          return;
        }
        latencies[static_cast<size_t>(c)].push_back(Seconds(call, Clock::now()));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double wall = Seconds(start, Clock::now());
  for (const absl::Status& error : errors) {
    if (!error.ok()) return error;
  }
  std::vector<double> all;
  for (const auto& per_client : latencies) all.insert(all.end(), per_client.begin(), per_client.end());
  nlohmann::json report = BaseReport(args, loaded);
  report["tokens"] = tokens;
  report["clients"] = clients;
  report["latency_seconds"] = all;
  report["latency"] = Summary(all);
  report["wall_seconds"] = wall;
  report["requests_per_second"] = static_cast<double>(all.size()) / wall;
  return report;
}

// The unquantized model and the same checkpoint under --quantize, both in memory, compared on
// the same prompts (quantize_drift.h).
absl::StatusOr<nlohmann::json> Drift(const ModelArgs& args, int prompts, int tokens) {
  if (args.quantize == "none" || args.quantize.empty()) {
    return absl::InvalidArgumentError("drift: --quantize int8|int4 is required (the reference is "
                                      "the unquantized model)");
  }
  ModelArgs reference_args = args;
  reference_args.quantize = "none";
  reference_args.quantize_group_size = 0;
  reference_args.quantize_lm_head = "none";
  reference_args.quantize_activations = "none";
  PLACER_ASSIGN_OR_RETURN(auto reference, Load(reference_args));
  PLACER_ASSIGN_OR_RETURN(auto quantized, Load(args));
  PLACER_ASSIGN_OR_RETURN(nlohmann::json drift,
                          MeasureQuantizeDrift(*reference.model, *quantized.model, prompts, tokens));
  nlohmann::json report = BaseReport(args, quantized);
  report["quantize_group_size"] = args.quantize_group_size;
  report["drift"] = drift;
  return report;
}

int Finish(const absl::StatusOr<nlohmann::json>& result) {
  if (!result.ok()) {
    std::cerr << "placer-bench-model: " << result.status().message() << "\n";
    return 1;
  }
  PrintJson(*result);
  return 0;
}

}  // namespace
}  // namespace placer::bench

int main(int argc, char** argv) {
  placer::base::ReexecWithBetterOpenBlasCore(argv);
  placer::base::KeepFreedMemoryForReuse();  // as placerd does, so in-process numbers match it
  using namespace placer::bench;
  CLI::App app{"placer-bench-model: in-process model benchmarks (JSON on stdout)"};
  app.require_subcommand(1);
  ModelArgs args;
  int prompt_tokens = 64, new_tokens = 32, runs = 3, tokens = 8, iterations = 300, clients = 1;
  int64_t mib = 256;
  auto add_model = [&](CLI::App* command) {
    command->add_option("dir", args.dir, "checkpoint directory")->required();
    command->add_option("--threads", args.threads, "intra-op compute threads")->check(CLI::Range(1, 256));
  };
  CLI::App* decode = app.add_subcommand("decode", "greedy decode, every step timed (batch 1, or --batch N)");
  add_model(decode);
  decode->add_option("--layout", args.layout, "cpu, gpu, half-cpu, half-disk, all-cpu, all-disk");
  decode->add_flag("--no-prefetch", args.no_prefetch, "stage offloaded blocks on entry only");
  decode->add_option("--quantize", args.quantize, "none, int8 or int4, as placerd's");
  decode->add_option("--quantize-group-size", args.quantize_group_size, "as placerd's");
  decode->add_option("--quantize-lm-head", args.quantize_lm_head, "none, int8 or int4, as placerd's");
  decode->add_option("--quantize-activations", args.quantize_activations, "none or int8, as placerd's");
  decode->add_option("--dtype", args.dtype, "auto (the checkpoint's), F32 or BF16, as placerd's");
  decode->add_option("--offload-dir", args.offload_dir, "for disk tensors needing conversion");
  decode->add_option("--prompt-tokens", prompt_tokens)->check(CLI::Range(1, 100000));
  decode->add_option("--new-tokens", new_tokens)->check(CLI::Range(2, 100000));
  decode->add_option("--runs", runs)->check(CLI::Range(1, 1000));
  int batch = 1;
  decode->add_option("--batch", batch, "sequences decoded together (ExtendBatch), each prompt other ids")
      ->check(CLI::Range(1, 256));
  int read_probe_mib = 0;
  decode->add_option("--read-probe-mib", read_probe_mib,
                     "after every other timed step, time one read of a buffer this large (0: "
                     "none), that step's own read-bandwidth floor; batch 1 only")
      ->check(CLI::Range(0, 65536));
  CLI::App* forward = app.add_subcommand("forward", "Forward latency / throughput in process");
  add_model(forward);
  forward->add_option("--tokens", tokens)->check(CLI::Range(1, 100000));
  forward->add_option("--iterations", iterations, "calls per client")->check(CLI::Range(1, 10000000));
  forward->add_option("--clients", clients, "threads calling at once")->check(CLI::Range(1, 256));
  int prompts = 8, drift_tokens = 32;
  CLI::App* drift = app.add_subcommand(
      "drift", "--quantize against the unquantized model: top-1 agreement and mean KL of the "
               "next-token distributions on fixed prompts");
  add_model(drift);
  drift->add_option("--quantize", args.quantize, "int8 or int4, as placerd's")->required();
  drift->add_option("--quantize-group-size", args.quantize_group_size, "as placerd's");
  drift->add_option("--quantize-lm-head", args.quantize_lm_head, "none, int8 or int4, as placerd's");
  drift->add_option("--quantize-activations", args.quantize_activations, "none or int8, as placerd's");
  drift->add_option("--dtype", args.dtype, "auto (the checkpoint's), F32 or BF16, as placerd's");
  drift->add_option("--prompts", prompts)->check(CLI::Range(1, 10000));
  drift->add_option("--tokens", drift_tokens, "ids per prompt")->check(CLI::Range(1, 100000));
  CLI::App* bandwidth = app.add_subcommand("bandwidth", "host copy / read bandwidth");
  bandwidth->add_option("--mib", mib, "buffer size")->check(CLI::Range(1, 65536));
  bandwidth->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  bandwidth->add_option("--runs", runs)->check(CLI::Range(1, 1000));
  CLI::App* products = app.add_subcommand(
      "products", "few-row products of a small-preset step: placer's kernels vs sgemm vs gemv");
  products->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  products->add_option("--runs", runs)->check(CLI::Range(1, 1000));
  bool force_avx2 = false;
  products->add_flag("--avx2", force_avx2, "measure the AVX2 kernels even on an AVX-512 CPU");
  std::vector<int64_t> product_rows = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  products->add_option("--rows", product_rows, "input rows to measure (default 1 2 4 ... 256)")
      ->check(CLI::Range(1, 4096));
  CLI::App* quantized = app.add_subcommand(
      "quantized-products",
      "few-row products over packed int8/int4 weights: placer's kernels per ISA vs dequantize + "
      "GEMM vs BF16");
  quantized->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  quantized->add_option("--runs", runs)->check(CLI::Range(1, 1000));
  std::vector<int64_t> quantized_rows = {1, 2, 4, 8, 16, 32, 64, 128};
  quantized->add_option("--rows", quantized_rows, "input rows to measure (default 1 2 4 ... 128)")
      ->check(CLI::Range(1, 4096));
  std::vector<std::string> quantized_schemes;
  quantized->add_option("--schemes", quantized_schemes,
                        "only these weight schemes (int8 int4_g32 int4_g64 int4_g128; default all)")
      ->check(CLI::IsMember({"int8", "int4_g32", "int4_g64", "int4_g128"}));
  CLI::App* stream = app.add_subcommand(
      "packed-stream",
      "one-row products over a model's layer shapes packed at int4/int8 (BF16 or F32 rows, and "
      "int8 activations), each pass beside a plain read of as many bytes: the kernels' share of "
      "the read bandwidth (bench/packed_stream.h)");
  stream->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  stream->add_option("--mib", mib, "packed bytes per scheme (whole layers)")->check(CLI::Range(1, 65536));
  int stream_passes = 20;
  stream->add_option("--passes", stream_passes)->check(CLI::Range(1, 100000));
  std::string stream_shapes = "tinyllama";
  stream->add_option("--shapes", stream_shapes,
                     "whose linears: tinyllama (a layer), small (a small-preset layer), "
                     "small-lm-head ([32000, 768])")
      ->check(CLI::IsMember({"tinyllama", "small", "small-lm-head"}));
  bool stream_float32_rows = false;
  stream->add_flag("--float32-rows", stream_float32_rows, "float32 input rows (default BF16)");
  CLI::App* prefetch = app.add_subcommand(
      "stream-prefetch",
      "one-row F32 products with and without a same-stream prefetch, in alternating pairs: how "
      "far ahead the float kernels prefetch (model/stream_prefetch.h)");
  prefetch->add_option("--mib", mib, "weight size")->check(CLI::Range(1, 65536));
  prefetch->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  int pairs = 100;
  prefetch->add_option("--pairs", pairs)->check(CLI::Range(1, 100000));
  std::vector<int64_t> distances = {2048, 4096, 6144, 8192, 12288, 16384};
  prefetch->add_option("--distances", distances, "bytes ahead to measure")
      ->check(CLI::Range(64, 1 << 24));
  CLI::App* sampling = app.add_subcommand(
      "sampling", "what placerd's sampler costs per token (greedy, temperature, top-k, top-p) "
                  "on random logits, beside std::max_element and a sort of the vocabulary");
  int64_t vocab = 32000;
  sampling->add_option("--vocab", vocab, "logits per row")->check(CLI::Range(2, 1 << 22));
  int sampled_tokens = 200;
  sampling->add_option("--tokens", sampled_tokens, "tokens per run")->check(CLI::Range(1, 1000000));
  sampling->add_option("--runs", runs)->check(CLI::Range(1, 1000));
  CLI::App* handoff = app.add_subcommand(
      "loop-handoff", "what one SpinningWorkers loop costs beyond its tasks' work: loops of 2-86 "
                      "busy-wait tasks of 0, 1 and 4 us (bench/loop_handoff.h)");
  handoff->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  int handoff_loops = 2000;
  handoff->add_option("--loops", handoff_loops, "loops per batch")->check(CLI::Range(1, 1000000));
  int handoff_batches = 9;
  handoff->add_option("--batches", handoff_batches, "batches (the median is reported)")
      ->check(CLI::Range(1, 1000));
  CLI::App* interleaved = app.add_subcommand(
      "interleaved-rows", "4-bit rows stored 1, 2 or 4 at a time block by block, each run by a "
                          "copy of the decode kernel's inner block, against a sum of the same "
                          "bytes (bench/interleaved_rows.h)");
  interleaved->add_option("--threads", args.threads)->check(CLI::Range(1, 256));
  int64_t interleaved_mib = 680;
  interleaved->add_option("--mib", interleaved_mib, "packed bytes (whole layers)")
      ->check(CLI::Range(1, 65536));
  int interleaved_passes = 10;
  interleaved->add_option("--passes", interleaved_passes)->check(CLI::Range(1, 100000));
  app.add_subcommand("blas-coretype",
                     "print the OPENBLAS_CORETYPE this process runs with (empty: OpenBLAS's own "
                     "choice), so bench/run gives its peers the same kernels");
  CLI11_PARSE(app, argc, argv);

  if (app.got_subcommand("blas-coretype")) {
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    std::cout << (coretype != nullptr ? coretype : "") << "\n";
    return 0;
  }
  try {
    if (*decode) return Finish(Decode(args, prompt_tokens, new_tokens, runs, batch, read_probe_mib));
    if (*forward) return Finish(ForwardCalls(args, tokens, iterations, clients));
    if (*drift) return Finish(Drift(args, prompts, drift_tokens));
    if (*sampling) {
      PrintJson(MeasureSampling(vocab, sampled_tokens, runs));
      return 0;
    }
    if (*prefetch) {
      PrintJson(MeasureStreamPrefetch(mib << 20, args.threads, pairs, distances));
      return 0;
    }
    placer::model::SetComputeThreads(args.threads);
    if (*interleaved) {
      PrintJson(MeasureInterleavedRows(interleaved_mib << 20, interleaved_passes));
      return 0;
    }
    if (*handoff) {
      PrintJson(MeasureLoopHandoff(handoff_loops, handoff_batches));
      return 0;
    }
    if (*stream) {
      const PackedStreamShapes shapes = stream_shapes == "small"           ? PackedStreamShapes::kSmall
                                        : stream_shapes == "small-lm-head" ? PackedStreamShapes::kSmallLmHead
                                                                           : PackedStreamShapes::kTinyLlama;
      PrintJson(MeasurePackedStream(mib << 20, stream_passes, shapes, stream_float32_rows));
      return 0;
    }
    if (*quantized) {
      PrintJson(MeasureQuantizedProducts(runs, quantized_rows, quantized_schemes));
      return 0;
    }
    PrintJson(*products ? MeasureSmallBatchProducts(runs, force_avx2, product_rows)
                        : MeasureMemoryBandwidth(mib << 20, runs));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "placer-bench-model: " << e.what() << "\n";
    return 1;
  }
}
