// placer-bench-grpc: measurements of placerd through its gRPC API, one JSON object on stdout
// per invocation. bench/run drives it; see bench/README.md.
//
//   placer-bench-grpc ready --target ADDR --log FILE [--vocab V] [--until-listening] -- PLACERD ARGS...
//   placer-bench-grpc generate --target ADDR --vocab V [--streams 1] [--prompt-tokens 16]
//                              [--new-tokens 32] [--variant 0]
//   placer-bench-grpc forward --target ADDR --vocab V [--tokens 8] [--iterations 300] [--clients 1]
#include <CLI/CLI.hpp>

#include <iostream>

#include "bench/bench_common.h"
#include "bench/daemon_ready.h"
#include "bench/grpc_clients.h"

int main(int argc, char** argv) {
  using namespace placer::bench;
  CLI::App app{"placer-bench-grpc: placerd benchmarks through gRPC (JSON on stdout)"};
  app.require_subcommand(1);
  std::string target;
  int64_t vocab = 0;
  auto add_common = [&](CLI::App* command) {
    command->add_option("--target", target, "placerd address host:port")->required();
    command->add_option("--vocab", vocab, "vocabulary size (token ids are drawn below it)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  };
  ReadyArgs ready_args;
  CLI::App* ready = app.add_subcommand("ready", "start placerd, time it to SERVING, stop it");
  add_common(ready);
  ready->add_option("--log", ready_args.log_path, "daemon stdout/stderr")->required();
  ready->add_flag("--until-listening", ready_args.until_listening, "ready once it answers at all");
  ready->add_option("--forward-tokens", ready_args.forward_tokens, "one Forward after ready; 0: none");
  ready->add_option("--timeout", ready_args.timeout_seconds, "seconds");
  ready->add_option("command", ready_args.argv, "placerd and its arguments (after --)")->required();
  StreamArgs stream_args;
  CLI::App* generate = app.add_subcommand("generate", "concurrent Generate streams");
  add_common(generate);
  generate->add_option("--streams", stream_args.streams)->check(CLI::Range(1, 1024));
  generate->add_option("--prompt-tokens", stream_args.prompt_tokens)->check(CLI::Range(1, 100000));
  generate->add_option("--new-tokens", stream_args.new_tokens)->check(CLI::Range(1, 100000));
  generate->add_option("--variant", stream_args.variant);
  generate->add_option("--temperature", stream_args.temperature, "0 (default): greedy")
      ->check(CLI::Range(0.0, 100.0));
  generate->add_option("--top-p", stream_args.top_p)->check(CLI::Range(0.0, 1.0));
  generate->add_option("--top-k", stream_args.top_k);
  UnaryArgs unary_args;
  CLI::App* forward = app.add_subcommand("forward", "unary Forward latency / throughput");
  add_common(forward);
  forward->add_option("--tokens", unary_args.tokens)->check(CLI::Range(1, 100000));
  forward->add_option("--iterations", unary_args.iterations, "calls per client")->check(CLI::Range(1, 10000000));
  forward->add_option("--clients", unary_args.clients)->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<nlohmann::json> result;
  if (*ready) {
    ready_args.target = target;
    ready_args.vocab = vocab;
    if (ready_args.forward_tokens > 0 && vocab == 0) {
      std::cerr << "placer-bench-grpc: ready --forward-tokens needs --vocab\n";
      return 2;
    }
    result = MeasureDaemonReady(ready_args);
  } else if (vocab == 0) {
    std::cerr << "placer-bench-grpc: --vocab is required\n";
    return 2;
  } else if (*generate) {
    stream_args.target = target;
    stream_args.vocab = vocab;
    result = RunGenerateStreams(stream_args);
  } else {
    unary_args.target = target;
    unary_args.vocab = vocab;
    result = RunUnaryForward(unary_args);
  }
  if (!result.ok()) {
    std::cerr << "placer-bench-grpc: " << result.status().message() << "\n";
    return 1;
  }
  PrintJson(*result);
  return 0;
}
