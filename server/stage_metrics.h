// The leader's metrics of a pipeline group, read at scrape time: every stage's planned and
// live memory per device (label node: the leader's from its own accounting, the workers'
// as they last published it), bytes of steps sent to the next stage, and the time passes
// waited for the other stages.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <atomic>
#include <vector>

#include "server/model_slot.h"
#include "server/stage_leader.h"

namespace placer::server {

class StageMetrics final : public prometheus::Collectable {
 public:
  // `model`: the leader's own (node0), read at every scrape; must outlive the exposer.
  explicit StageMetrics(const ModelSlot* model) : model_(model) {}
  // Set once the group is joined; nothing is reported before.
  void SetLeader(const StageLeader* leader) { leader_.store(leader); }
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const ModelSlot* model_;
  std::atomic<const StageLeader*> leader_{nullptr};
};

}  // namespace placer::server
