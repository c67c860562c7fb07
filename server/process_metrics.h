// The standard process_* metrics (as the Go and Python clients export them), which
// prometheus-cpp does not provide: read from /proc/self at scrape time.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

namespace placer::server {

class ProcessMetrics final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace placer::server
