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
             const PlanOptions& options, const OffloadReserve& reserve, Detours detours)
      : tree_(tree), units_(units), budgets_(budgets), roles_(roles), options_(options),
        detours_(detours) {
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
    gpu_index_.assign(n, -1);
    for (std::size_t g = 0; g < gpus_.size(); ++g) gpu_index_[gpus_[g]] = static_cast<int>(g);
    if (options.strategy != Strategy::kSequential) ApplyBalancedShares();
    gpu_state_.assign(gpus_.size(), GpuState::kFresh);
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      // No room, or no share (balanced_low_0's cuda:0 when the others hold everything).
      if (cap_[gpus_[g]] <= 0) gpu_state_[g] = GpuState::kClosed;
    }
    for (std::size_t g = 0; g < gpus_.size() && cursor_ < 0; ++g) {
      if (Open(static_cast<int>(g))) cursor_ = static_cast<int>(g);
    }
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
      switch (PlaceOnGpus(item, closure)) {
        case Outcome::kPlaced:
          continue;
        case Outcome::kSplit:
          Split(item, queue);
          continue;
        case Outcome::kOffload:
          break;
      }
      if (detours_.return_to_gpu && PlaceOnReturnGpu(item, closure)) continue;
      if (IsSplittable(item) && !FitsOffloadCursor(closure)) {
        Split(item, queue);
        continue;
      }
      if (!PlaceOffloaded(item, closure)) return FailureFor(item, closure);
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

  enum class Outcome { kPlaced, kSplit, kOffload };

  bool Open(int g) const { return gpu_state_[g] != GpuState::kClosed; }
  bool Used(int g) const { return gpu_state_[g] != GpuState::kFresh; }

  // The GPU walk (planner.h). The current GPU takes what fits. A block it cannot take ends
  // its run once it holds something; while it is still empty, the block goes ahead to another
  // GPU (one for the whole plan) and it stays current. Otherwise the first open GPU, in
  // order, that takes the block becomes current; with none, the block is offloaded.
  Outcome PlaceOnGpus(const WorkItem& item, const Closure& closure) {
    if (cursor_ >= 0) {
      const int gpu = gpus_[cursor_];
      if (Fits(closure, {gpu, true})) {
        Place(item, closure, gpu);
        return Outcome::kPlaced;
      }
      if (IsSplittable(item)) return Outcome::kSplit;
      if (!Used(cursor_) && detours_.go_ahead) {
        for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
          if (g == cursor_ || !Open(g) || (ahead_ >= 0 && g != ahead_)) continue;
          if (Fits(closure, {gpus_[g], true})) {
            ahead_ = g;
            Place(item, closure, gpus_[g]);
            return Outcome::kPlaced;
          }
        }
      }
      if (Used(cursor_)) gpu_state_[cursor_] = GpuState::kClosed;
      cursor_ = -1;
    } else if (IsSplittable(item) && AnyOpenGpu()) {
      return Outcome::kSplit;
    }
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      if (Open(g) && Fits(closure, {gpus_[g], true})) {
        cursor_ = g;
        Place(item, closure, gpus_[g]);
        return Outcome::kPlaced;
      }
    }
    return Outcome::kOffload;
  }

  bool AnyOpenGpu() const {
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      if (Open(g) && cap_[gpus_[g]] > 0) return true;
    }
    return false;
  }

  // A block to be offloaded may instead go back, once, to a GPU whose run ended with room left (the final norm and head after offloaded layers; a balanced share's
  // remainder): blocks go there while they fit, and after the first that does not, never again.
  bool PlaceOnReturnGpu(const WorkItem& item, const Closure& closure) {
    if (return_ == Return::kOver) return false;
    if (return_ == Return::kOpen) {
      if (Fits(closure, {return_gpu_, true})) {
        Place(item, closure, return_gpu_);
        return true;
      }
      return_ = Return::kOver;
      return false;
    }
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      if (!Open(static_cast<int>(g)) && Fits(closure, {gpus_[g], true})) {
        return_ = Return::kOpen;
        return_gpu_ = gpus_[g];
        Place(item, closure, return_gpu_);
        return true;
      }
    }
    return false;
  }

  // cpu, then disk: cpu's run ends at the first block it cannot take.
  bool FitsOffloadCursor(const Closure& closure) const {
    if (cpu_ >= 0 && !cpu_closed_) return Fits(closure, {cpu_, false});
    return disk_ >= 0 && Fits(closure, {disk_, false});
  }

  bool PlaceOffloaded(const WorkItem& item, const Closure& closure) {
    if (cpu_ >= 0 && !cpu_closed_) {
      if (Fits(closure, {cpu_, false})) {
        Place(item, closure, cpu_);
        return true;
      }
      cpu_closed_ = true;
    }
    if (disk_ >= 0 && Fits(closure, {disk_, false})) {
      Place(item, closure, disk_);
      return true;
    }
    return false;
  }

  void Split(const WorkItem& item, std::deque<WorkItem>& queue) const {
    const auto& items = tree_.modules()[item.index].items;
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      queue.push_front({it->is_module, it->index});
    }
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

  // Why a block landed off the GPUs: the room each faster device had, or that its run had
  // ended (one contiguous run per device, in execution order).
  std::string WhyNotFaster(const Closure& closure, int device) const {
    std::vector<std::string> parts;
    const DeviceKind kind = budgets_[device].info.device.kind;
    std::vector<int> faster = gpus_;
    if (kind == DeviceKind::kDisk && cpu_ >= 0) faster.push_back(cpu_);
    for (int d : faster) {
      const auto room = static_cast<std::uint64_t>(room_[d]);
      const std::uint64_t cost = CostOn(closure, d);
      if (cost > room) {
        parts.push_back(absl::StrCat(budgets_[d].info.device.Name(), " full: ", FormatBytes(room),
                                     " left, block needs ", FormatBytes(cost)));
      } else {
        parts.push_back(absl::StrCat(budgets_[d].info.device.Name(), ": ", FormatBytes(room),
                                     " left, but its run of blocks had ended"));
      }
    }
    return absl::StrJoin(parts, "; ");
  }

  void Place(const WorkItem& item, const Closure& closure, int d) {
    if (!budgets_[d].info.device.is_gpu() &&
        (roles_.has_gpu || budgets_[d].info.device.kind == DeviceKind::kDisk)) {
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
    if (gpu_index_[d] >= 0 && gpu_state_[gpu_index_[d]] == GpuState::kFresh) {
      gpu_state_[gpu_index_[d]] = GpuState::kUsed;
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
  const Detours detours_;
  enum class GpuState { kFresh, kUsed, kClosed };  // kClosed: its run has ended
  std::vector<GpuState> gpu_state_;  // per gpus_ entry
  int cursor_ = -1;                  // index into gpus_ of the current GPU; -1: none
  int ahead_ = -1;                   // index into gpus_ of the GPU blocks went ahead to
  std::vector<int> gpu_index_;    // per budget: index into gpus_, or -1
  enum class Return { kNotYet, kOpen, kOver };
  Return return_ = Return::kNotYet;
  int return_gpu_ = -1;
  bool cpu_closed_ = false;       // cpu's run ended: the rest goes to disk
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
                            const PlanOptions& options, const OffloadReserve& reserve,
                            Detours detours) {
  SinglePass pass(tree, units, budgets, roles, options, reserve, detours);
  PassResult result;
  result.failure = pass.Run();
  result.unit_device = pass.unit_device();
  result.steps = std::move(pass.steps());
  result.reasons = std::move(pass.reasons());
  return result;
}

}  // namespace placer::placement
