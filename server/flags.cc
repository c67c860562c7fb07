#include "server/flags.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "placement/plan_flags.h"

namespace placer::server {

absl::StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  size_t unit_at = 0;
  while (unit_at < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[unit_at])) || text[unit_at] == '.')) {
    ++unit_at;
  }
  double value = 0;
  if (unit_at == 0 || !absl::SimpleAtod(text.substr(0, unit_at), &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a duration (examples: 30s, 500ms, 2m)"));
  }
  const std::string unit = text.substr(unit_at);
  double millis_per_unit = 0;
  if (unit.empty() || unit == "s") {
    millis_per_unit = 1000;
  } else if (unit == "ms") {
    millis_per_unit = 1;
  } else if (unit == "m") {
    millis_per_unit = 60'000;
  } else if (unit == "h") {
    millis_per_unit = 3'600'000;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' has unknown unit '", unit, "' (use ms, s, m or h)"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(value * millis_per_unit));
}

absl::Status ValidateListenAddress(const std::string& flag, const std::string& address) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", address, "' is not a listen address (", why,
                     "; expected host:port such as 127.0.0.1:50051 or [::1]:50051)"));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  const std::string host = address.substr(0, colon);
  const std::string port_text = address.substr(colon + 1);
  if (host.empty()) return bad("no host");
  if (host.front() == '[' && host.back() != ']') return bad("unclosed '['");
  if (host.front() != '[' && host.find(':') != std::string::npos) {
    return bad("IPv6 hosts need brackets");
  }
  uint32_t port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return bad("port must be a number from 0 to 65535");
  }
  return absl::OkStatus();
}

FlagParseOutcome ParseDaemonFlags(int argc, const char* const* argv) {
  DaemonOptions options;
  std::string drain_timeout = "30s";
  CLI::App app{"placerd: serves a large language model across GPUs, CPU and disk over gRPC"};
  app.option_defaults()->always_capture_default();
  app.add_option("--listen", options.listen, "gRPC address to listen on (host:port)");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "Prometheus /metrics address (host:port); empty disables it");
  app.add_option("--health-listen", options.health_listen,
                 "extra plaintext address serving only grpc.health.v1 (for Kubernetes gRPC "
                 "probes, which cannot use TLS); empty: health on --listen only");
  app.add_option("--model", options.model_dir,
                 "Hugging Face checkpoint directory to serve; empty starts with no model");
  app.add_option("--model-name", options.model_name,
                 "the model's name in the Open Inference Protocol (model_name of ModelInfer, "
                 "ModelReady, ...); empty: the --model directory's name");
  app.add_option("--log-format", options.log_format, "log line format")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", options.log_level, "minimum level logged")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--threads", options.threads,
                 "compute threads for the forward pass; 0 means one per CPU core")
      ->check(CLI::Range(0, 1024));
  app.add_option("--max-batch-tokens", options.max_batch_tokens,
                 "most tokens in one forward pass: running streams' next tokens first, then "
                 "chunks of new prompts")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-queue", options.max_queue,
                 "requests that may wait beyond --max-batch-size; more are refused with "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--prefetch,!--no-prefetch", options.placement.prefetch,
               "stage the next offloaded block's weights while the current block computes "
               "(--no-prefetch: stage each block when it is entered)");
  app.add_flag("--warm-up,!--no-warm-up", options.warm_up,
               "before SERVING, run one forward pass of one token, so the first request does "
               "not pay what a model's first call does (BF16 weights re-laid out for AMX tiles "
               "or pair order, mapped weights read in, buffers allocated): ready then means "
               "warm, at that cost to the start");
  app.add_option("--max-stop-sequences", options.max_stop_sequences,
                 "most stop strings one Generate request may give (each at most 256 bytes)")
      ->check(CLI::Range(0, 1024));
  placement::AddPlacementFlags(app, options.placement);
  StageFlags stage_flags;
  AddStageFlags(app, stage_flags);
  app.add_option("--dtype", options.placement.dtype,
                 "compute dtype: auto (default: the checkpoint's; F16 as BF16 without a real "
                 "GPU), F32, BF16, or F16 (real GPUs only); the plan is sized in it")
      ->group("Placement");
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM server certificate (chain); with --tls-key serves gRPC over TLS")
      ->group("Access");
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert")->group("Access");
  app.add_option("--tls-client-ca", options.tls_client_ca,
                 "PEM CA certificate(s); clients must present a certificate they signed (mTLS)")
      ->group("Access");
  app.add_option("--auth-token-file", options.auth_token_file,
                 "bearer tokens, one a line ('#' comments); Placer RPCs need one; SIGHUP reloads")
      ->group("Access");
  app.add_option("--max-request-bytes", options.max_request_bytes,
                 "largest request message accepted; larger ones get RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1024, std::numeric_limits<int>::max()))
      ->group("Access");
  app.add_option("--drain-timeout", drain_timeout,
                 "on SIGTERM, how long in-flight requests may finish (e.g. 30s, 500ms)");
  // Kubernetes hands flags over as a mounted ConfigMap file; flags given on the command line
  // win over the file.
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error
  app.set_config("--config", "",
                 "read flags from this TOML file: one `flag-name = value` a line "
                 "(e.g. drain-timeout = \"45s\")");

  FlagParseOutcome outcome;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    outcome.message = app.help();
    outcome.exit_code = 0;
    return outcome;
  } catch (const CLI::ParseError& e) {
    outcome.message = absl::StrCat("placerd: ", e.what(), " (see placerd --help)");
    outcome.exit_code = 2;
    return outcome;
  }

  absl::Status status = ValidateListenAddress("--listen", options.listen);
  if (status.ok() && !options.metrics_listen.empty()) {
    status = ValidateListenAddress("--metrics-listen", options.metrics_listen);
  }
  if (status.ok() && !options.health_listen.empty()) {
    status = ValidateListenAddress("--health-listen", options.health_listen);
  }
  auto drain = ParseDuration(drain_timeout);
  if (status.ok() && !drain.ok()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("--drain-timeout: ", drain.status().message()));
  }
  if (status.ok()) {
    auto stages = ResolveStageOptions(stage_flags, [](const char* name) { return std::getenv(name); });
    if (stages.ok()) {
      options.stages = *stages;
    } else {
      status = stages.status();
    }
  }
  if (!status.ok()) {
    outcome.message = absl::StrCat("placerd: ", status.message());
    outcome.exit_code = 2;
    return outcome;
  }
  options.drain_timeout = *drain;
  outcome.options = options;
  return outcome;
}

}  // namespace placer::server
