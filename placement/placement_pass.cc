#include "placement/placement_pass.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/byte_size.h"
#include "placement/device_roles.h"
#include "placement/placement_units.h"

namespace placer::placement {
namespace {

struct WorkItem {
  bool is_module = true;
  int index = 0;  // module or tensor
};

struct Attempt {
  int device = 0;
  bool capped = false;  // balanced share rather than the device's full room
};

class SinglePass {
 public:
  SinglePass(const ModuleTree& tree, const PlacementUnits& units,
             const std::vector<DeviceBudget>& budgets, const DeviceRoles& roles,
             const PlanOptions& options, const OffloadReserve& reserve)
      : tree_(tree), units_(units), budgets_(budgets), roles_(roles), options_(options) {
    const int n = static_cast<int>(budgets.size());
    room_.assign(n, 0);
    for (int d = 0; d < n; ++d) {
      std::int64_t room = static_cast<std::int64_t>(budgets[d].limit_bytes);
      if (roles.runs_blocks[d]) room -= static_cast<std::int64_t>(options.activation_reserve_bytes);
      if (d == roles.execution) {
        room -= static_cast<std::int64_t>(reserve.staging + reserve.offloaded_kv);
      }
      room_[d] = std::max<std::int64_t>(room, 0);
      if (budgets[d].limit_bytes == 0) continue;  // unusable, e.g. left out of --max-memory
      const DeviceKind kind = budgets[d].info.device.kind;
      if (kind == DeviceKind::kCuda) gpus_.push_back(d);
      if (kind == DeviceKind::kCpu) cpu_ = d;
      if (kind == DeviceKind::kDisk) disk_ = d;
    }
    cap_ = room_;
    if (options.strategy != Strategy::kSequential) ApplyBalancedShares();
    unit_device_.assign(units.units.size(), -1);
    group_placed_.assign(units.groups.size(), false);
    unit_weight_prefix_.assign(units.units.size() + 1, 0);
    unit_kv_prefix_.assign(units.units.size() + 1, 0);
    for (std::size_t u = 0; u < units.units.size(); ++u) {
      unit_weight_prefix_[u + 1] = unit_weight_prefix_[u] + units.units[u].weights_bytes;
      unit_kv_prefix_[u + 1] = unit_kv_prefix_[u] + units.units[u].kv_bytes;
    }
  }

  // Places everything or returns the first block that fits nowhere.
  std::optional<Failure> Run() {
    std::deque<WorkItem> queue = {{true, 0}};
    while (!queue.empty()) {
      const WorkItem item = queue.front();
      queue.pop_front();
      const Closure closure = ClosureOf(item);
      if (closure.unplaced_units == 0) continue;
      const std::vector<Attempt> attempts = Attempts();
      if (attempts.empty()) return FailureFor(item, closure);
      if (Fits(closure, attempts[0])) {
        Place(item, closure, attempts[0]);
        continue;
      }
      if (IsSplittable(item)) {
        const auto& items = tree_.modules()[item.index].items;
        for (auto it = items.rbegin(); it != items.rend(); ++it) {
          queue.push_front({it->is_module, it->index});
        }
        continue;
      }
      bool placed = false;
      for (std::size_t a = 1; a < attempts.size() && !placed; ++a) {
        if (!Fits(closure, attempts[a])) continue;
        Place(item, closure, attempts[a]);
        placed = true;
      }
      if (!placed) return FailureFor(item, closure);
    }
    return std::nullopt;
  }

  const std::vector<int>& unit_device() const { return unit_device_; }
  std::vector<PlacementStep>& steps() { return steps_; }
  std::vector<std::pair<std::string, std::string>>& reasons() { return reasons_; }

 private:
  struct Closure {
    int unit_begin = 0;
    int unit_end = 0;
    std::vector<int> tied_groups;  // unplaced multi-unit groups to bring along
    int unplaced_units = 0;
    std::uint64_t weights = 0;
    std::uint64_t kv = 0;
  };

  // Accelerate's get_balanced_memory, with the buffer taken from the largest
  // block rather than the first no-split block found. The last GPU keeps its
  // full room so nothing spills to cpu just because shares were rounded.
  void ApplyBalancedShares() {
    std::vector<int> usable;
    for (int d : gpus_) {
      if (room_[d] > 0) usable.push_back(d);
    }
    const bool low_zero = options_.strategy == Strategy::kBalancedLow0 && usable.size() >= 2;
    if (usable.size() < 2) return;
    std::uint64_t total = 0;
    std::uint64_t largest = 0;
    for (const UnitGroup& group : units_.groups) {
      total += group.weights_bytes + group.kv_bytes;
      largest = std::max(largest, group.weights_bytes + group.kv_bytes);
    }
    const std::uint64_t sharing = usable.size() - (low_zero ? 1 : 0);
    const auto per_gpu = static_cast<std::int64_t>(total / sharing + largest);
    for (std::size_t i = 0; i + 1 < usable.size(); ++i) {
      cap_[usable[i]] = std::min(cap_[usable[i]], per_gpu);
    }
    if (low_zero) {
      std::int64_t others = 0;
      for (std::size_t i = 1; i < usable.size(); ++i) others += cap_[usable[i]];
      const std::int64_t rest = static_cast<std::int64_t>(total) - others;
      cap_[usable[0]] = std::min(room_[usable[0]], std::max<std::int64_t>(rest, 0));
    }
  }

  std::vector<Attempt> Attempts() const {
    std::vector<Attempt> attempts;
    std::vector<int> gpu_order;
    for (std::size_t i = cursor_; i < gpus_.size(); ++i) gpu_order.push_back(gpus_[i]);
    for (std::size_t i = 0; i < cursor_ && i < gpus_.size(); ++i) gpu_order.push_back(gpus_[i]);
    for (int d : gpu_order) attempts.push_back({d, true});
    if (options_.strategy != Strategy::kSequential) {
      for (int d : gpu_order) attempts.push_back({d, false});
    }
    if (cpu_ >= 0) attempts.push_back({cpu_, false});
    if (disk_ >= 0) attempts.push_back({disk_, false});
    return attempts;
  }

  std::uint64_t CostOn(const Closure& closure, int device) const {
    return closure.weights + (roles_.runs_blocks[device] ? closure.kv : 0);
  }

  bool Fits(const Closure& closure, const Attempt& attempt) const {
    const std::int64_t room = attempt.capped ? cap_[attempt.device] : room_[attempt.device];
    return static_cast<std::int64_t>(CostOn(closure, attempt.device)) <= room;
  }

  bool IsSplittable(const WorkItem& item) const {
    if (!item.is_module) return false;
    const auto& module = tree_.modules()[item.index];
    return !module.no_split && !module.items.empty();
  }

  Closure ClosureOf(const WorkItem& item) const {
    Closure c;
    std::vector<int> candidate_groups;
    if (item.is_module) {
      c.unit_begin = units_.unit_begin[item.index];
      c.unit_end = units_.unit_end[item.index];
      candidate_groups = units_.tied_groups_touching[item.index];
    } else {
      c.unit_begin = units_.unit_of_tensor[item.index];
      c.unit_end = c.unit_begin + 1;
      const int group = units_.units[c.unit_begin].group;
      if (units_.groups[group].units.size() > 1) candidate_groups.push_back(group);
    }
    c.unplaced_units = c.unit_end - c.unit_begin;
    c.weights = unit_weight_prefix_[c.unit_end] - unit_weight_prefix_[c.unit_begin];
    c.kv = unit_kv_prefix_[c.unit_end] - unit_kv_prefix_[c.unit_begin];
    // Only tied groups can have placed units inside a range still queued.
    for (int g : candidate_groups) {
      const bool placed = group_placed_[g];
      if (!placed) c.tied_groups.push_back(g);
      for (int u : units_.groups[g].units) {
        const bool inside = u >= c.unit_begin && u < c.unit_end;
        const PlacementUnit& unit = units_.units[u];
        if (placed && inside) {
          c.unplaced_units -= 1;
          c.weights -= unit.weights_bytes;
          c.kv -= unit.kv_bytes;
        } else if (!placed && !inside) {
          c.unplaced_units += 1;
          c.weights += unit.weights_bytes;
          c.kv += unit.kv_bytes;
        }
      }
    }
    return c;
  }

  std::string NameOf(const WorkItem& item) const {
    return item.is_module ? tree_.modules()[item.index].name : tree_.tensors()[item.index].name;
  }

  // Why a block landed on an offload device: the room each faster device had.
  std::string WhyNotFaster(const Closure& closure, int device) const {
    std::vector<std::string> parts;
    const DeviceKind kind = budgets_[device].info.device.kind;
    std::vector<int> faster = gpus_;
    if (kind == DeviceKind::kDisk && cpu_ >= 0) faster.push_back(cpu_);
    for (int d : faster) {
      parts.push_back(absl::StrCat(budgets_[d].info.device.Name(), " full: ",
                                   FormatBytes(static_cast<std::uint64_t>(room_[d])),
                                   " left, block needs ", FormatBytes(CostOn(closure, d))));
    }
    return absl::StrJoin(parts, "; ");
  }

  void Place(const WorkItem& item, const Closure& closure, const Attempt& attempt) {
    const int d = attempt.device;
    if (roles_.IsOffload(d)) {
      std::string why = WhyNotFaster(closure, d);
      if (!why.empty()) reasons_.emplace_back(NameOf(item), std::move(why));
    }
    PlacementStep step;
    step.name = NameOf(item);
    step.device = budgets_[d].info.device;
    step.weights_bytes = closure.weights;
    step.kv_bytes = closure.kv;
    step.kv_on_device = roles_.runs_blocks[d];
    auto assign = [&](int u) {
      if (unit_device_[u] >= 0) return;
      unit_device_[u] = d;
      for (int t = units_.units[u].tensor_begin; t < units_.units[u].tensor_end; ++t) {
        step.tensors.push_back(t);
      }
    };
    for (int u = closure.unit_begin; u < closure.unit_end; ++u) assign(u);
    for (int g : closure.tied_groups) {
      for (int u : units_.groups[g].units) assign(u);
      group_placed_[g] = true;
    }
    const auto cost = static_cast<std::int64_t>(CostOn(closure, d));
    room_[d] -= cost;
    cap_[d] = std::max<std::int64_t>(cap_[d] - cost, 0);
    if (attempt.capped) {
      for (std::size_t i = cursor_; i < gpus_.size(); ++i) {
        if (gpus_[i] == d) cursor_ = i;
      }
    }
    steps_.push_back(std::move(step));
  }

  Failure FailureFor(const WorkItem& item, const Closure& closure) const {
    Failure failure;
    failure.block = NameOf(item);
    failure.needs = closure.weights;
    for (std::size_t d = 0; d < budgets_.size(); ++d) {
      if (budgets_[d].limit_bytes == 0) continue;
      const auto room = static_cast<std::uint64_t>(room_[d]);
      if (failure.most_room_device.empty() || room > failure.most_room) {
        failure.most_room = room;
        failure.most_room_device = budgets_[d].info.device.Name();
        failure.needs = CostOn(closure, static_cast<int>(d));
      }
    }
    return failure;
  }

  const ModuleTree& tree_;
  const PlacementUnits& units_;
  const std::vector<DeviceBudget>& budgets_;
  const DeviceRoles& roles_;
  const PlanOptions& options_;
  std::vector<std::int64_t> room_;  // full room left after reserves
  std::vector<std::int64_t> cap_;   // room within the balanced share
  std::vector<int> gpus_;
  int cpu_ = -1;
  int disk_ = -1;
  std::size_t cursor_ = 0;  // index into gpus_ of the GPU being filled
  std::vector<int> unit_device_;
  std::vector<bool> group_placed_;
  std::vector<std::uint64_t> unit_weight_prefix_;
  std::vector<std::uint64_t> unit_kv_prefix_;
  std::vector<PlacementStep> steps_;
  std::vector<std::pair<std::string, std::string>> reasons_;
};

}  // namespace

PassResult RunPlacementPass(const ModuleTree& tree, const PlacementUnits& units,
                            const std::vector<DeviceBudget>& budgets, const DeviceRoles& roles,
                            const PlanOptions& options, const OffloadReserve& reserve) {
  SinglePass pass(tree, units, budgets, roles, options, reserve);
  PassResult result;
  result.failure = pass.Run();
  result.unit_device = pass.unit_device();
  result.steps = std::move(pass.steps());
  result.reasons = std::move(pass.reasons());
  return result;
}

}  // namespace placer::placement
