#include "server/metrics.h"

#include <prometheus/gauge.h>

#include "absl/strings/str_cat.h"
#include "server/build_info.h"
#include "server/process_metrics.h"

namespace placer::server {

DaemonMetrics::DaemonMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      process_metrics_(std::make_shared<ProcessMetrics>()),
      requests_total_(&prometheus::BuildCounter()
                           .Name("placer_requests_total")
                           .Help("Finished Placer RPCs by method and gRPC status code.")
                           .Register(*registry_)),
      auth_failures_total_(&prometheus::BuildCounter()
                                .Name("placer_auth_failures_total")
                                .Help("Placer RPCs refused for a missing or wrong bearer token.")
                                .Register(*registry_)) {
  prometheus::BuildGauge()
      .Name("placer_build_info")
      .Help("Version and commit of the running placerd; always 1.")
      .Register(*registry_)
      .Add({{"version", PLACER_VERSION}, {"commit", PLACER_GIT_COMMIT}})
      .Set(1);
}

absl::Status DaemonMetrics::Serve(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen: cannot listen on ", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(process_metrics_);
  return absl::OkStatus();
}

void DaemonMetrics::CountRequest(const std::string& rpc, const std::string& code) {
  requests_total_->Add({{"rpc", rpc}, {"code", code}}).Increment();
}

void DaemonMetrics::CountAuthFailure(const std::string& rpc) {
  auth_failures_total_->Add({{"rpc", rpc}}).Increment();
}

}  // namespace placer::server
