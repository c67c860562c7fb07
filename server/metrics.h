// The Prometheus side of placerd: one registry, served at /metrics by prometheus-cpp's
// exposer, plus the families the daemon updates itself as requests run. Figures read from
// the served model at scrape time live in served_model_metrics.h.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace placer::server {

class DaemonMetrics {
 public:
  // Registers placer_build_info, the process_* metrics, the request counters and histograms.
  DaemonMetrics();

  // Serves the registry and every added collectable on address ("host:port"); fails if the
  // address cannot be bound.
  absl::Status Serve(const std::string& address);

  // A collectable read at every scrape (must outlive this object). Call before Serve.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  // Counts one finished RPC under its gRPC status code name (OK, UNAVAILABLE, ...).
  void CountRequest(const std::string& rpc, const std::string& code);
  void ObserveRequestSeconds(const std::string& rpc, double seconds);

  // Counts one call refused for a missing or wrong bearer token.
  void CountAuthFailure(const std::string& rpc);

  // A Generate request starts generating from a prompt of `prompt_tokens`.
  void SequenceStarted(uint64_t prompt_tokens);
  // One token of one stream reached its client.
  void TokenGenerated(double since_previous_token_seconds, bool first_token);
  // After each scheduler step: the sequences it advanced together, running and queued after it.
  void ObserveSchedulerStep(int step_sequences, int running, int queued);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  prometheus::Family<prometheus::Counter>* requests_total_;
  prometheus::Family<prometheus::Histogram>* request_duration_;
  prometheus::Family<prometheus::Counter>* auth_failures_total_;
  prometheus::Histogram* time_to_first_token_;
  prometheus::Histogram* inter_token_latency_;
  prometheus::Histogram* batch_size_;
  prometheus::Counter* generated_tokens_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Gauge* running_sequences_;
  prometheus::Gauge* queue_depth_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace placer::server
