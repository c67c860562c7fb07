// The leader's metrics of a pipeline group, read at scrape time: every stage's planned
// memory per device (label node), bytes of steps sent to the next stage, and the time passes
// waited for the other stages.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <atomic>
#include <vector>

#include "server/stage_leader.h"

namespace placer::server {

class StageMetrics final : public prometheus::Collectable {
 public:
  // Set once the group is joined; nothing is reported before.
  void SetLeader(const StageLeader* leader) { leader_.store(leader); }
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::atomic<const StageLeader*> leader_{nullptr};
};

}  // namespace placer::server
