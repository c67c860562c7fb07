// The placement flags, declared once for both `placerd` and `placer plan`, so the daemon and
// the CLI accept the same spellings, ranges and defaults and plan the same way.
#pragma once

#include <CLI/CLI.hpp>

#include "placement/plan_command.h"

namespace placer::placement {

// Adds --devices, --max-memory, --gpu-memory-utilization, --strategy, --max-seq-len,
// --max-batch-size, --max-batch-total-tokens, --offload-dir and --device-map, writing into
// `options`. (--dtype and --prefetch each tool declares with its own default and help.)
void AddPlacementFlags(CLI::App& app, PlacementOptions& options);

}  // namespace placer::placement
