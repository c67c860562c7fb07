#include "placement/planner.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/byte_size.h"
#include "placement/device_map.h"
#include "placement/device_roles.h"
#include "placement/placement_pass.h"
#include "placement/plan_accounting.h"
#include "placement/placement_units.h"

namespace placer::placement {
namespace {

// Reserving more never offloads less, so a handful of rounds settle; the
// last resort reserves for the worst case, which always covers the plan.
constexpr int kMaxReserveRounds = 6;

OffloadReserve WorstCaseReserve(const PlacementUnits& units, const DeviceRoles& roles) {
  OffloadReserve reserve(roles.staging_slots);
  for (const UnitGroup& group : units.groups) reserve.AddOffloaded(group.weights_bytes, group.kv_bytes);
  return reserve;
}

absl::StatusOr<Plan> PlanWithDetours(const ModuleTree& tree, const PlacementUnits& units,
                                     const std::vector<DeviceBudget>& budgets,
                                     const ExecutionChoice& choice, const PlanOptions& options,
                                     Detours detours);

absl::Status DoesNotFit(const Failure& failure, const PlacementUnits& units,
                        const std::vector<DeviceBudget>& budgets, const DeviceRoles& roles,
                        const PlanOptions& options, const OffloadReserve& reserve) {
  std::uint64_t need = 0;
  for (const UnitGroup& group : units.groups) need += group.weights_bytes + group.kv_bytes;
  std::uint64_t room = 0;
  bool has_disk = false;
  std::vector<std::string> names;
  // What each device holds back, so that a budget that looks large enough next to the model
  // ("cpu hold 0 B" beside --max-memory cpu=2GiB) says where it went and which flags lower it.
  std::vector<std::string> reserves;
  for (std::size_t d = 0; d < budgets.size(); ++d) {
    if (budgets[d].limit_bytes == 0) continue;
    names.push_back(budgets[d].info.device.Name());
    has_disk = has_disk || budgets[d].info.device.kind == DeviceKind::kDisk;
    const std::uint64_t activations = roles.runs_blocks[d] ? options.activation_reserve_bytes : 0;
    const std::uint64_t staging = static_cast<int>(d) == roles.execution ? reserve.staging : 0;
    const std::uint64_t held = activations + staging;
    room += budgets[d].limit_bytes > held ? budgets[d].limit_bytes - held : 0;
    if (held == 0) continue;
    std::vector<std::string> parts;
    if (activations > 0) {
      parts.push_back(absl::StrCat(FormatBytes(activations),
                                   " for activations (a prefill of --max-batch-size x "
                                   "--max-seq-len tokens: lower either to shrink it)"));
    }
    if (staging > 0) parts.push_back(absl::StrCat(FormatBytes(staging), " for staging offloaded blocks"));
    reserves.push_back(absl::StrCat(budgets[d].info.device.Name(), " (budget ",
                                    FormatBytes(budgets[d].limit_bytes), ") holds back ",
                                    absl::StrJoin(parts, " and ")));
  }
  const std::uint64_t short_total = need > room ? need - room : 0;
  const std::uint64_t short_block =
      failure.needs > failure.most_room ? failure.needs - failure.most_room : 0;
  const std::uint64_t short_by = std::max(short_total, short_block);
  return absl::ResourceExhaustedError(absl::StrCat(
      "the model does not fit ", has_disk ? "even with disk" : "(no --offload-dir, so no disk)",
      ": block '", failure.block, "' needs ", FormatBytes(failure.needs),
      " but the most room left on any device is ", FormatBytes(failure.most_room), " (",
      failure.most_room_device.empty() ? "no device" : failure.most_room_device,
      "); weights and KV cache need ", FormatBytes(need), " in all and ",
      absl::StrJoin(names, ", "), " hold ", FormatBytes(room),
      " after reserves: short by ", short_by, " bytes (", FormatBytes(short_by), ")",
      reserves.empty() ? "" : absl::StrCat("; reserves: ", absl::StrJoin(reserves, "; "))));
}

// Reasons were recorded per placed block; report them per device-map key.
std::vector<std::pair<std::string, std::string>> ReasonsByMapKey(
    const DeviceMap& map, const std::vector<std::pair<std::string, std::string>>& by_block) {
  std::set<std::string, std::less<>> keys;
  for (const auto& entry : map) keys.insert(entry.first);
  std::set<std::string> done;
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [block, why] : by_block) {
    std::string key = block;
    while (keys.count(key) == 0 && !key.empty()) {
      const std::size_t dot = key.rfind('.');
      key = dot == std::string::npos ? "" : key.substr(0, dot);
    }
    if (keys.count(key) == 0) continue;
    if (done.insert(key).second) out.emplace_back(key, why);
  }
  return out;
}

std::uint64_t GpuBytes(const Plan& plan) {
  std::uint64_t bytes = 0;
  for (const DevicePlan& device : plan.devices) {
    if (device.device.is_gpu()) bytes += device.weights_bytes;
  }
  return bytes;
}

bool OffloadsAnything(const Plan& plan) {
  for (const DevicePlan& device : plan.devices) {
    if (!device.device.is_gpu() && device.weights_bytes > 0) return true;
  }
  return false;
}

// The hop bound of planner.h: device switches between consecutive tensors in execution order
// <= devices used + offloaded runs. A tensor a step placed outside its own range (brought
// along by a tie) is where its group is, so it does not count.
bool WithinHopBound(const ModuleTree& tree, const Plan& plan) {
  std::vector<bool> counted(tree.tensors().size(), true);
  for (const PlacementStep& step : plan.steps) {
    int begin = 0;
    int end = 0;
    if (std::optional<int> module = tree.FindModule(step.name)) {
      begin = tree.modules()[*module].tensor_begin;
      end = tree.modules()[*module].tensor_end;
    } else if (std::optional<int> tensor = tree.FindTensor(step.name)) {
      begin = *tensor;
      end = begin + 1;
    }
    for (int t : step.tensors) counted[t] = t >= begin && t < end;
  }
  int switches = 0;
  int offloaded_runs = 0;
  std::set<Device> used;
  const Device* previous = nullptr;
  for (std::size_t t = 0; t < counted.size(); ++t) {
    if (!counted[t]) continue;
    const Device& device = plan.tensor_devices[t];
    used.insert(device);
    if (previous != nullptr && device != *previous) ++switches;
    if (!device.is_gpu() && (previous == nullptr || previous->is_gpu())) ++offloaded_runs;
    previous = &device;
  }
  return switches <= static_cast<int>(used.size()) + offloaded_runs;
}

// One plan for one way of running offloaded blocks; its reserves re-planned until they cover
// what it offloads. Detours are dropped, return first, while the plan hops more than the bound
// allows; without them every device holds one run, which always keeps it.
absl::StatusOr<Plan> PlanWithChoice(const ModuleTree& tree, const PlacementUnits& units,
                                    const std::vector<DeviceBudget>& budgets,
                                    const ExecutionChoice& choice, const PlanOptions& options) {
  absl::StatusOr<Plan> plan;
  for (const Detours detours :
       {Detours{true, true}, Detours{true, false}, Detours{false, false}}) {
    plan = PlanWithDetours(tree, units, budgets, choice, options, detours);
    if (!plan.ok() || WithinHopBound(tree, *plan)) return plan;
  }
  return plan;
}
absl::StatusOr<Plan> PlanWithDetours(const ModuleTree& tree, const PlacementUnits& units,
                                     const std::vector<DeviceBudget>& budgets,
                                     const ExecutionChoice& choice, const PlanOptions& options,
                                     Detours detours) {
  const DeviceRoles roles = AssignDeviceRoles(budgets, choice);
  OffloadReserve reserve(roles.staging_slots);
  PassResult pass;
  for (int round = 0;; ++round) {
    if (round == kMaxReserveRounds) reserve = WorstCaseReserve(units, roles);
    pass = RunPlacementPass(tree, units, budgets, roles, options, reserve, detours);
    if (pass.failure) {
      return DoesNotFit(*pass.failure, units, budgets, roles, options, reserve);
    }
    const OffloadReserve needs = OffloadNeeds(units, roles, pass.unit_device);
    if (needs.staging <= reserve.staging && needs.offloaded_kv <= reserve.offloaded_kv) break;
    if (round == kMaxReserveRounds) {
      return absl::InternalError("planner: worst-case offload reserve does not cover the plan");
    }
    reserve.staging = std::max(reserve.staging, needs.staging);
    reserve.offloaded_kv = std::max(reserve.offloaded_kv, needs.offloaded_kv);
  }

  Plan plan;
  plan.strategy = options.strategy;
  AccountPlan(tree, units, budgets, roles, pass.unit_device, options.activation_reserve_bytes,
              reserve, plan);
  const DevicePlan& execution = plan.devices[roles.execution];
  if (execution.left_bytes() < 0) {
    // PlanPlacement words the refusal when no other choice fits either.
    return absl::ResourceExhaustedError(absl::StrCat(
        execution.device.Name(), " cannot hold the reserves for running the offloaded blocks: staging ",
        FormatBytes(execution.staging_reserve_bytes), " + KV cache ",
        FormatBytes(execution.kv_reserve_bytes), " + activations ",
        FormatBytes(execution.activation_reserve_bytes), " exceed its budget of ",
        FormatBytes(execution.budget_bytes), " by ",
        static_cast<std::uint64_t>(-execution.left_bytes()), " bytes"));
  }
  plan.offload_staged = choice.staged;
  plan.staging_slots = choice.staged ? choice.staging_slots : 0;
  plan.steps = std::move(pass.steps);
  plan.reasons = ReasonsByMapKey(plan.device_map, pass.reasons);
  return plan;
}

// Balanced shares are moot once the GPUs overflow: then the GPUs' full room (sequential) is
// used when it keeps more on them.
absl::StatusOr<Plan> PlanWithStrategy(const ModuleTree& tree, const PlacementUnits& units,
                                      const std::vector<DeviceBudget>& budgets,
                                      const ExecutionChoice& choice, const PlanOptions& options) {
  absl::StatusOr<Plan> plan = PlanWithChoice(tree, units, budgets, choice, options);
  if (options.strategy == Strategy::kSequential || (plan.ok() && !OffloadsAnything(*plan))) {
    return plan;
  }
  PlanOptions sequential = options;
  sequential.strategy = Strategy::kSequential;
  absl::StatusOr<Plan> full = PlanWithChoice(tree, units, budgets, choice, sequential);
  if (!full.ok()) return plan;
  if (plan.ok() && GpuBytes(*plan) >= GpuBytes(*full)) return plan;
  full->strategy = options.strategy;
  full->strategy_note = "the GPUs overflow their balanced shares, so each was filled to its room";
  return full;
}

}  // namespace

absl::StatusOr<Plan> PlanPlacement(const ModuleTree& tree,
                                   const std::vector<DeviceBudget>& given_budgets,
                                   const PlanOptions& options) {
  // A GPU that cannot even hold the activation reserve cannot run a block.
  std::vector<DeviceBudget> budgets = given_budgets;
  for (DeviceBudget& budget : budgets) {
    if (budget.info.device.is_gpu() && budget.limit_bytes > 0 &&
        budget.limit_bytes <= options.activation_reserve_bytes) {
      budget.source = absl::StrCat(budget.source, "; unused: ",
                                   FormatBytes(budget.limit_bytes), " is not more than the ",
                                   FormatBytes(options.activation_reserve_bytes),
                                   " activation reserve");
      budget.limit_bytes = 0;
    }
  }
  const std::vector<ExecutionChoice> choices =
      ExecutionChoices(budgets, options.offload_exec, options.prefetch);
  if (choices.empty()) {
    return absl::FailedPreconditionError(
        options.offload_exec == OffloadExec::kCpu
            ? "--offload-exec cpu: no cpu to run the offloaded blocks on"
            : "no device to run on: neither a GPU nor cpu");
  }
  const PlacementUnits units = PlacementUnits::FromTree(tree);

  std::vector<std::string> rejected;
  std::vector<std::string> tried;
  absl::Status last_error;
  for (const ExecutionChoice& choice : choices) {
    absl::StatusOr<Plan> plan = PlanWithStrategy(tree, units, budgets, choice, options);
    if (!plan.ok()) {
      rejected.push_back(absl::StrCat(choice.Describe(budgets), ": ", plan.status().message()));
      tried.push_back(choice.Describe(budgets));
      last_error = plan.status();
      continue;
    }
    if (!OffloadsAnything(*plan)) {
      plan->execution_reason = "nothing is offloaded";
    } else {
      plan->execution_reason = absl::StrCat(
          choice.Describe(budgets), " (--offload-exec ",
          OffloadExecName(options.offload_exec), ")",
          rejected.empty() ? "" : "; not ", absl::StrJoin(rejected, "; not "));
    }
    return plan;
  }
  std::string message(last_error.message());
  if (message.rfind("the model does not fit", 0) != 0) {
    message = absl::StrCat("the model does not fit: ", message,
                           "; give it more memory (--max-memory) or lower --max-seq-len / "
                           "--max-batch-size");
  }
  if (tried.size() > 1) {
    tried.pop_back();
    absl::StrAppend(&message, " (offloaded blocks also tried: ", absl::StrJoin(tried, "; "), ")");
  }
  return absl::Status(last_error.code(), message);
}

}  // namespace placer::placement
