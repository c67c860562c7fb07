// The Prometheus side of placerd: one registry, served at /metrics by prometheus-cpp's
// exposer, plus the families the daemon updates itself.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace placer::server {

class DaemonMetrics {
 public:
  // Registers placer_build_info, the process_* metrics and the request counters.
  DaemonMetrics();

  // Serves the registry on address ("host:port"); fails if the address cannot be bound.
  absl::Status Serve(const std::string& address);

  // Counts one finished RPC under its gRPC status code name (OK, UNAVAILABLE, ...).
  void CountRequest(const std::string& rpc, const std::string& code);

  // Counts one call refused for a missing or wrong bearer token.
  void CountAuthFailure(const std::string& rpc);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_metrics_;
  prometheus::Family<prometheus::Counter>* requests_total_;
  prometheus::Family<prometheus::Counter>* auth_failures_total_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace placer::server
