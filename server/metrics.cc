#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "server/build_info.h"
#include "server/process_metrics.h"

namespace placer::server {
namespace {

// Seconds from a cached-prompt Forward (milliseconds) to a long generation (minutes).
const prometheus::Histogram::BucketBoundaries kRequestSeconds = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
// Prefill of a long prompt on offloaded weights can take many seconds.
const prometheus::Histogram::BucketBoundaries kFirstTokenSeconds = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// One decode step: milliseconds on a GPU, up to seconds when weights stream from disk.
const prometheus::Histogram::BucketBoundaries kInterTokenSeconds = {
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5};
const prometheus::Histogram::BucketBoundaries kBatchSizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};

}  // namespace

DaemonMetrics::DaemonMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_total_(&prometheus::BuildCounter()
                           .Name("placer_requests_total")
                           .Help("Finished Placer RPCs by method and gRPC status code.")
                           .Register(*registry_)),
      request_duration_(&prometheus::BuildHistogram()
                             .Name("placer_request_duration_seconds")
                             .Help("Wall time of Placer RPCs from arrival to status, by method.")
                             .Register(*registry_)),
      auth_failures_total_(&prometheus::BuildCounter()
                                .Name("placer_auth_failures_total")
                                .Help("Placer RPCs refused for a missing or wrong bearer token.")
                                .Register(*registry_)) {
  prometheus::BuildGauge()
      .Name("placer_build_info")
      .Help("Version and commit of the running placerd; always 1.")
      .Register(*registry_)
      .Add({{"version", PLACER_VERSION}, {"commit", BuildCommit()}})
      .Set(1);
  time_to_first_token_ = &prometheus::BuildHistogram()
                              .Name("placer_time_to_first_token_seconds")
                              .Help("From a Generate request's arrival to its first token.")
                              .Register(*registry_)
                              .Add({}, kFirstTokenSeconds);
  inter_token_latency_ = &prometheus::BuildHistogram()
                              .Name("placer_inter_token_latency_seconds")
                              .Help("Between consecutive tokens of one Generate stream.")
                              .Register(*registry_)
                              .Add({}, kInterTokenSeconds);
  batch_size_ = &prometheus::BuildHistogram()
                     .Name("placer_batch_size")
                     .Help("Sequences advanced together by one forward pass of the scheduler.")
                     .Register(*registry_)
                     .Add({}, kBatchSizes);
  generated_tokens_ = &prometheus::BuildCounter()
                           .Name("placer_generated_tokens_total")
                           .Help("Tokens generated and streamed by Generate.")
                           .Register(*registry_)
                           .Add({});
  prompt_tokens_ = &prometheus::BuildCounter()
                        .Name("placer_prompt_tokens_total")
                        .Help("Prompt tokens of Generate requests that started generating.")
                        .Register(*registry_)
                        .Add({});
  running_sequences_ = &prometheus::BuildGauge()
                            .Name("placer_running_sequences")
                            .Help("Sequences in the running batch (continuous batching).")
                            .Register(*registry_)
                            .Add({});
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("placer_queue_depth")
                      .Help("Generate requests waiting for a place in the running batch.")
                      .Register(*registry_)
                      .Add({});
  collectables_.push_back(std::make_shared<ProcessMetrics>());
}

absl::Status DaemonMetrics::Serve(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen: cannot listen on ", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  for (const auto& collectable : collectables_) exposer_->RegisterCollectable(collectable);
  return absl::OkStatus();
}

void DaemonMetrics::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  collectables_.push_back(std::move(collectable));
}

void DaemonMetrics::CountRequest(const std::string& rpc, const std::string& code) {
  requests_total_->Add({{"rpc", rpc}, {"code", code}}).Increment();
}

void DaemonMetrics::ObserveRequestSeconds(const std::string& rpc, double seconds) {
  request_duration_->Add({{"rpc", rpc}}, kRequestSeconds).Observe(seconds);
}

void DaemonMetrics::CountAuthFailure(const std::string& rpc) {
  auth_failures_total_->Add({{"rpc", rpc}}).Increment();
}

void DaemonMetrics::SequenceStarted(uint64_t prompt_tokens) {
  prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
}

void DaemonMetrics::TokenGenerated(double since_previous_token_seconds, bool first_token) {
  (first_token ? time_to_first_token_ : inter_token_latency_)
      ->Observe(since_previous_token_seconds);
  generated_tokens_->Increment();
}

void DaemonMetrics::ObserveSchedulerStep(int step_sequences, int running, int queued) {
  if (step_sequences > 0) batch_size_->Observe(step_sequences);
  running_sequences_->Set(running);
  queue_depth_->Set(queued);
}

}  // namespace placer::server
