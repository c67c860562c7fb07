// The device maps the in-process benchmarks run a model under, by name, so bench/run and the
// results JSON can say which one a number belongs to:
//   cpu        everything on cpu, computed on the CPU (what placerd does with no GPU)
//   gpu        everything resident on one virtual GPU (cuda:0, host memory): the compute
//              baseline of the offload runs
//   half-cpu   the second half of the decoder layers, the final norm and lm_head on cpu,
//   half-disk  (or disk), the rest on cuda:0; offloaded blocks staged onto cuda:0
//   all-cpu    every block on cpu (or disk), run on cuda:0 with staging: each forward pass
//   all-disk   copies every weight onto the execution device
// Virtual GPUs make staging a real copy in host memory, exactly what the hooks do for a GPU.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "loader/model_config.h"
#include "runtime/runtime_plan.h"

namespace placer::bench {

absl::StatusOr<runtime::RuntimePlan> LayoutPlan(const std::string& layout,
                                                  const loader::ModelConfig& config,
                                                  bool prefetch, const std::string& offload_dir);

}  // namespace placer::bench
