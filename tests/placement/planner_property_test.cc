// Random module trees x random budgets: every plan must cover each tensor
// exactly once, keep no-split blocks and tied groups whole, stay within every
// budget, make few device hops (switches in execution order <= devices used +
// offloaded runs), and never leave a GPU empty that had room for a block
// placed on a slower tier. Seeded, so failures reproduce.
#include <map>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "placement/device_map.h"
#include "placement/planner.h"
#include "tests/placement/test_trees.h"

namespace placer::placement {
namespace {

using testing::Budgets;
using testing::Bytes;

struct Case {
  ModuleTreeSpec spec;
  std::vector<DeviceBudget> budgets;
  PlanOptions options;
};

Case RandomCase(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  std::uint64_t total = 0;
  const int top = pick(1, 6);
  int tied_left = pick(0, 2);
  for (int i = 0; i < top; ++i) {
    const std::string module = absl::StrCat("m", i);
    if (pick(0, 3) == 0) {  // a direct tensor of the root
      c.spec.tensors.push_back(Bytes(absl::StrCat("w", i), pick(0, 60)));
    }
    const int children = pick(1, 8);
    for (int j = 0; j < children; ++j) {
      const std::string child = absl::StrCat(module, ".c", j);
      if (pick(0, 2) == 0) c.spec.module_classes[child] = "Block";
      if (pick(0, 3) == 0) c.spec.kv_cache_bytes[child] = pick(0, 20);
      const int tensors = pick(1, 4);
      for (int k = 0; k < tensors; ++k) {
        const std::string leaf = pick(0, 1) ? absl::StrCat(child, ".t", k)
                                            : absl::StrCat(child, ".sub.t", k);
        c.spec.tensors.push_back(Bytes(leaf, pick(0, 40)));
      }
    }
    if (pick(0, 3) == 0) c.spec.tensors.push_back(Bytes(module + ".bias", pick(0, 10)));
    if (tied_left > 0 && i > 0 && pick(0, 1)) {
      --tied_left;
      const int bytes = pick(1, 50);
      const std::string a = absl::StrCat("m", pick(0, i - 1), ".tie", i);
      const std::string b = absl::StrCat(module, pick(0, 1) ? ".c0.tied" : ".tied");
      c.spec.tensors.push_back(Bytes(b, bytes));
      c.spec.tensors.insert(c.spec.tensors.begin() + pick(0, 2), Bytes(a, bytes));
      c.spec.tied.push_back({a, b});
    }
  }
  c.spec.no_split_classes = {"Block"};
  for (const auto& tensor : c.spec.tensors) total += tensor.shape[0];

  std::vector<std::pair<std::string, std::uint64_t>> limits;
  const int gpus = pick(0, 3);
  for (int g = 0; g < gpus; ++g) {
    limits.push_back({absl::StrCat("cuda:", g), pick(0, 1) ? pick(0, total / 2 + 1) : 0});
  }
  limits.push_back({"cpu", static_cast<std::uint64_t>(pick(0, total + 1))});
  if (pick(0, 2) != 0) limits.push_back({"disk", static_cast<std::uint64_t>(pick(0, 2 * total + 1))});
  c.budgets = Budgets(limits);
  c.options.strategy = static_cast<Strategy>(pick(0, 2));
  c.options.activation_reserve_bytes = pick(0, 3) == 0 ? pick(0, 30) : 0;
  return c;
}

int Tier(const Device& device) { return static_cast<int>(device.kind); }

// Each tensor as name(bytes)=device, then each device's budget and weights: the failure
// message of the hop check.
std::string DescribeWalk(const ModuleTree& tree, const Plan& plan) {
  std::string out;
  for (std::size_t t = 0; t < tree.tensors().size(); ++t) {
    const auto& tensor = tree.tensors()[t];
    absl::StrAppend(&out, tensor.name, "(", tensor.bytes, tensor.tied_group >= 0 ? ",tied" : "",
                    ")=", plan.tensor_devices[t].Name(), " ");
  }
  for (const DevicePlan& device : plan.devices) {
    absl::StrAppend(&out, "| ", device.device.Name(), " budget ", device.budget_bytes,
                    " weights ", device.weights_bytes, " reserved ", device.reserved_bytes(), " ");
  }
  return out;
}

void CheckPlan(const ModuleTree& tree, const Case& c, const Plan& plan) {
  const auto& tensors = tree.tensors();
  ASSERT_EQ(plan.tensor_devices.size(), tensors.size());

  // Each tensor is covered by exactly one map key, which names its device.
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    int covering = 0;
    for (const auto& [key, device] : plan.device_map) {
      if (!IsDottedPrefix(key, tensors[t].name)) continue;
      ++covering;
      EXPECT_EQ(device, plan.tensor_devices[t]) << tensors[t].name;
    }
    EXPECT_EQ(covering, 1) << tensors[t].name;
  }
  // Steps place each tensor once.
  std::vector<int> placed(tensors.size(), 0);
  for (const PlacementStep& step : plan.steps) {
    for (int t : step.tensors) {
      ++placed[t];
      EXPECT_EQ(plan.tensor_devices[t], step.device);
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) EXPECT_EQ(placed[t], 1) << tensors[t].name;

  // No-split blocks and tied groups whole.
  for (const auto& module : tree.modules()) {
    if (!module.no_split) continue;
    for (int t = module.tensor_begin; t < module.tensor_end; ++t) {
      EXPECT_EQ(plan.tensor_devices[t], plan.tensor_devices[module.tensor_begin]) << module.name;
    }
  }
  for (const auto& group : tree.tied_groups()) {
    for (int t : group) EXPECT_EQ(plan.tensor_devices[t], plan.tensor_devices[group[0]]);
  }

  // Budgets, with weights recounted independently.
  std::map<Device, std::uint64_t> weights;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    weights[plan.tensor_devices[t]] += tensors[t].counted_bytes();
  }
  // The planner may retire a GPU too small for the activation reserve; its
  // reported budget is then 0, so roles come from the reported budgets.
  bool has_gpu = false;
  for (const DevicePlan& device : plan.devices) {
    has_gpu |= device.device.is_gpu() && device.budget_bytes > 0;
  }
  auto runs_blocks = [&](const DevicePlan& d) {
    return d.budget_bytes > 0 && (d.device.is_gpu() || d.device == plan.execution_device);
  };
  std::map<Device, std::int64_t> room;
  for (std::size_t d = 0; d < c.budgets.size(); ++d) {
    const DevicePlan& device = plan.devices[d];
    EXPECT_EQ(device.weights_bytes, weights[device.device]) << device.device.Name();
    EXPECT_GE(device.left_bytes(), 0) << device.device.Name();
    if (device.weights_bytes > 0) {
      EXPECT_GT(device.budget_bytes, 0u);
    }
    EXPECT_LE(device.budget_bytes, c.budgets[d].limit_bytes);
    std::int64_t fixed = runs_blocks(device) ? c.options.activation_reserve_bytes : 0;
    if (device.device == plan.execution_device) {
      std::uint64_t kv_here = 0;
      for (const PlacementStep& step : plan.steps) {
        if (step.device == device.device && step.kv_on_device) kv_here += step.kv_bytes;
      }
      fixed += device.staging_reserve_bytes + (device.kv_reserve_bytes - kv_here);
    }
    room[device.device] = static_cast<std::int64_t>(device.budget_bytes) - fixed;
  }
  if (!has_gpu) {
    EXPECT_EQ(plan.execution_device, Device::Cpu());
  }

  // No GPU left empty that had room for a block placed on a slower tier. (cpu's run ends at
  // the first block it cannot take, as in Accelerate, even when it is still empty.)
  for (const PlacementStep& step : plan.steps) {
    for (const DevicePlan& other : plan.devices) {
      if (!other.device.is_gpu() || other.budget_bytes == 0 || other.weights_bytes > 0 ||
          Tier(other.device) >= Tier(step.device)) {
        continue;
      }
      const std::int64_t cost = step.weights_bytes + (runs_blocks(other) ? step.kv_bytes : 0);
      if (cost == 0) continue;  // an empty tensor takes no room anywhere
      EXPECT_GT(cost, room[other.device]) << step.name << " went to " << step.device.Name()
                                          << " but " << other.device.Name()
                                          << " stayed empty with room for it";
    }
  }

  // Few hops: device switches between consecutive tensors in execution order. A tensor that a
  // step placed outside its own range (brought along by a tie, with the no-split block around
  // it) goes where its group is, wherever it runs, so it is left out of the walk.
  std::vector<bool> brought_by_tie(tensors.size(), false);
  for (const PlacementStep& step : plan.steps) {
    int begin = 0;
    int end = 0;
    if (std::optional<int> module = tree.FindModule(step.name)) {
      begin = tree.modules()[*module].tensor_begin;
      end = tree.modules()[*module].tensor_end;
    } else {
      begin = *tree.FindTensor(step.name);
      end = begin + 1;
    }
    for (int t : step.tensors) brought_by_tie[t] = t < begin || t >= end;
  }
  std::vector<Device> walk;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (!brought_by_tie[t]) walk.push_back(plan.tensor_devices[t]);
  }
  int switches = 0;
  int offloaded_runs = 0;
  std::set<Device> used;
  for (std::size_t i = 0; i < walk.size(); ++i) {
    used.insert(walk[i]);
    if (i > 0 && walk[i] != walk[i - 1]) ++switches;
    if (!walk[i].is_gpu() && (i == 0 || walk[i - 1].is_gpu())) ++offloaded_runs;
  }
  EXPECT_LE(switches, static_cast<int>(used.size()) + offloaded_runs)
      << "device switches in execution order: " << DescribeWalk(tree, plan);
}

TEST(PlannerPropertyTest, RandomTreesAndBudgets) {
  std::mt19937 rng(20240611);
  int planned = 0;
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const Case c = RandomCase(rng);
    absl::StatusOr<ModuleTree> tree = ModuleTree::Build(c.spec, std::nullopt);
    ASSERT_TRUE(tree.ok()) << "case " << i << ": " << tree.status();
    absl::StatusOr<Plan> plan = PlanPlacement(*tree, c.budgets, c.options);
    if (!plan.ok()) {
      ASSERT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted)
          << "case " << i << ": " << plan.status();
      ++refused;
      continue;
    }
    ++planned;
    SCOPED_TRACE(absl::StrCat("case ", i));
    CheckPlan(*tree, c, *plan);
    if (HasFailure()) return;
  }
  // Both outcomes must be exercised for the test to mean anything.
  EXPECT_GT(planned, 500);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace placer::placement
