// The placement flags, declared once for both `placerd` and `placer plan`, so the daemon and
// the CLI accept the same spellings, ranges and defaults and plan the same way.
#pragma once

#include <CLI/CLI.hpp>

#include "placement/plan_command.h"

namespace placer::placement {

// Adds --devices, --max-memory, --gpu-memory-utilization, --strategy, --max-seq-len,
// --max-batch-size, --offload-dir and --device-map, writing into `args`. (--dtype is the
// CLI's alone: the daemon computes in F32 on the CPU for now and must plan what it runs.)
void AddPlacementFlags(CLI::App& app, PlanCommandArgs& args);

}  // namespace placer::placement
