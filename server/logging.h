// Process-wide logging through spdlog: plain text for people, one JSON object a line for
// log pipelines (Loki, Elasticsearch) that must not guess where a message ends.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace placer::server {

// format: "text" or "json"; level: spdlog level name. Logs go to stderr.
absl::Status ConfigureLogging(const std::string& format, const std::string& level);

}  // namespace placer::server
