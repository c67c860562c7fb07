// Command-line flags of placerd. Parsing never exits the process: main decides what to do
// with help text or an error, so tests can drive the parser directly.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "placement/plan_command.h"
#include "server/stage_flags.h"

namespace placer::server {

struct DaemonOptions {
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9400";  // empty disables the metrics endpoint
  // Plaintext grpc.health.v1 only, for probes that cannot speak TLS (kubelet); empty: none.
  std::string health_listen;
  std::string model_dir;                          // empty serves no model
  std::string model_name;  // the Open Inference Protocol's; empty: model_dir's last component
  std::string log_format = "text";                // text | json
  std::string log_level = "info";
  std::chrono::milliseconds drain_timeout{30000};
  // Access. Empty paths leave the feature off: plaintext, no token check.
  std::string tls_cert;         // PEM server certificate; with tls_key turns TLS on
  std::string tls_key;          // PEM private key of tls_cert
  std::string tls_client_ca;    // PEM CA; set: clients must present a certificate it signed
  std::string auth_token_file;  // bearer tokens, one a line; reloaded on SIGHUP
  int max_request_bytes = 4 << 20;  // larger request messages: RESOURCE_EXHAUSTED from gRPC
  int max_stop_sequences = 8;  // stop strings one Generate request may give
  int threads = 0;  // intra-op compute threads; 0 means one per CPU core
  // Continuous batching: --max-batch-size (in placement) sequences run at once; a forward pass
  // takes at most max_batch_tokens tokens; max_queue requests wait beyond that.
  int max_batch_tokens = 256;
  int max_queue = 64;
  // Before SERVING, one forward pass of one token, so that the first request does not pay what
  // a model's first call does (DaemonOptions' owner logs and times it).
  bool warm_up = false;
  // Placement flags, shared with `placer plan` so both plan the same way; the model loads
  // from the plan they make.
  placement::PlacementOptions placement;
  // A pipeline group over several placerd processes (stage_flags.h); stages 1 is none.
  StageOptions stages;
};

// What the command line asked for: options to run with, or text to print and an exit code
// (help: 0 on stdout; a bad flag: 2 on stderr, one line).
struct FlagParseOutcome {
  std::optional<DaemonOptions> options;
  std::string message;
  int exit_code = 0;
};

FlagParseOutcome ParseDaemonFlags(int argc, const char* const* argv);

// "host:port", "[v6]:port"; port 0..65535. Names the flag in the error.
absl::Status ValidateListenAddress(const std::string& flag, const std::string& address);

// "30s", "500ms", "2m", "1h", or a bare number of seconds.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text);

}  // namespace placer::server
