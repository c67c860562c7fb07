// Time to ready of a placerd process: start it, poll its health until SERVING (or until it
// answers at all), read its memory from /proc, send one Forward, stop it with SIGTERM.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include <nlohmann/json.hpp>

namespace placer::bench {

struct ReadyArgs {
  std::string target;             // where the daemon listens, e.g. 127.0.0.1:50123
  std::vector<std::string> argv;  // the daemon's command line (argv[0] is the binary)
  std::string log_path;           // its stdout and stderr
  bool until_listening = false;   // a daemon without a model: stop once it answers
  int forward_tokens = 8;         // 0: no Forward after ready
  int64_t vocab = 0;              // for the Forward's token ids
  double timeout_seconds = 300;
};

// {"ready_seconds", "peak_rss_bytes_at_ready", "rss_anon_bytes_at_ready", ...,
//  "first_forward_seconds", "peak_rss_bytes_after_forward", "logged_load_seconds"}.
absl::StatusOr<nlohmann::json> MeasureDaemonReady(const ReadyArgs& args);

}  // namespace placer::bench
