// What each budgeted device does at run time, shared by the planner and the
// device-map validator so both account reserves the same way.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/budget.h"

namespace placer::placement {

// --offload-exec: where blocks placed on cpu or disk run.
//   auto: staged onto a GPU through two slots (prefetch), else one slot, else on the cpu.
//   gpu:  staged onto a GPU (two slots, else one); refused when no GPU can hold a slot.
//   cpu:  on the cpu, where their weights live: no staging, only activations move.
enum class OffloadExec { kAuto, kGpu, kCpu };

absl::StatusOr<OffloadExec> ParseOffloadExec(absl::string_view text);
absl::string_view OffloadExecName(OffloadExec mode);

// One way to run offloaded blocks: the device (index into the budgets) and the staging slots
// it keeps. On the cpu the two "slots" are room for the blocks read ahead from disk.
struct ExecutionChoice {
  int execution = -1;
  int staging_slots = 2;
  bool staged = false;  // offloaded weights are copied onto `execution` for each use
  // "staged onto cuda:0 through two slots (...)", "run on cpu where their weights live".
  std::string Describe(const std::vector<DeviceBudget>& budgets) const;
};

// The choices `mode` allows, best first. Without a usable GPU the cpu runs everything.
// `prefetch` false (--no-prefetch) leaves out the two-slot choices.
std::vector<ExecutionChoice> ExecutionChoices(const std::vector<DeviceBudget>& budgets,
                                              OffloadExec mode, bool prefetch);

struct DeviceRoles {
  // Index into the budgets of the execution device of offloaded blocks. -1 only without cpu
  // and GPUs.
  int execution = -1;
  int staging_slots = 2;  // slots the execution device reserves for offloaded blocks
  bool has_gpu = false;
  // Runs blocks: keeps the activation reserve and the KV cache of the
  // layers placed on it. Every GPU with a budget; cpu when it is the execution device.
  std::vector<bool> runs_blocks;

  // Blocks here run on the execution device (staged or read ahead), whose KV cache they use.
  bool IsOffload(int device) const { return !runs_blocks[device]; }
};

DeviceRoles AssignDeviceRoles(const std::vector<DeviceBudget>& budgets,
                              const ExecutionChoice& choice);

// The one rule for where a block computes, given where its weights live and the plan's
// execution device for offloaded blocks (Plan::execution_device):
//   - weights on a GPU: on that GPU;
//   - offloaded (cpu, disk) while the execution device is a GPU: there, weights staged in;
//   - offloaded otherwise, and an offloaded row lookup (embedding) always: on the cpu, where
//     the weights are read (a lookup moves its few rows on, never the table).
// The planner records it per block (Plan::execution_map); the run time binds each block by
// the same rule, so the two agree (tests/model/placed_model_test.cc).
Device BlockExecutionDevice(const Device& weights, bool row_lookup,
                            const Device& offload_execution);

}  // namespace placer::placement
