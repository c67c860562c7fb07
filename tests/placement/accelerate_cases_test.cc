// Accelerate's own infer_auto_device_map test cases (tests/test_modeling_utils.py), written as
// module trees with the byte sizes Accelerate counts (F32 parameters and buffers): wherever
// Accelerate returns a map, placer plans one that is valid and keeps at least as many bytes
// on the GPUs as Accelerate's map does. Accelerate always has a disk; so do these budgets.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "placement/planner.h"
#include "tests/placement/test_trees.h"

namespace placer::placement {
namespace {

using testing::BuildTree;
using testing::Budgets;
using testing::Bytes;

struct AccelerateCase {
  std::string name;
  ModuleTreeSpec spec;
  std::vector<std::pair<std::string, std::uint64_t>> budgets;
  // Accelerate's expected map, as module prefix -> "gpu" or "off" (cpu / disk).
  std::map<std::string, bool> accelerate_on_gpu;
};

// ModelForTest: linear1 (3 -> 4) 64 bytes, batchnorm(4) 72 with its running statistics,
// linear2 (4 -> 5) 100; `extra` adds per-module buffers (test_infer_auto_device_map_with_buffer_check).
void AddModelForTest(ModuleTreeSpec& spec, const std::string& prefix,
                     const std::vector<int>& extra = {0, 0, 0}) {
  auto add = [&](const std::string& name, int bytes) {
    spec.tensors.push_back(Bytes(prefix + name, bytes));
  };
  add("linear1.weight", 48);
  add("linear1.bias", 16);
  if (extra[0] > 0) add("linear1.test_buffer1", extra[0]);
  add("batchnorm.weight", 16);
  add("batchnorm.bias", 16);
  add("batchnorm.running_mean", 16);
  add("batchnorm.running_var", 16);
  add("batchnorm.num_batches_tracked", 8);
  if (extra[1] > 0) add("batchnorm.test_buffer2", extra[1]);
  add("linear2.weight", 80);
  add("linear2.bias", 20);
  if (extra[2] > 0) add("linear2.test_buffer3", extra[2]);
  if (!prefix.empty()) spec.module_classes[prefix.substr(0, prefix.size() - 1)] = "ModelForTest";
}

void Linear(ModuleTreeSpec& spec, const std::string& name, int in, int out) {
  spec.tensors.push_back(Bytes(name + ".weight", 4 * in * out));
  spec.tensors.push_back(Bytes(name + ".bias", 4 * out));
}

std::vector<AccelerateCase> Cases() {
  std::vector<AccelerateCase> cases;
  constexpr std::uint64_t kDisk = 1ull << 40;
  {
    AccelerateCase c{"model_for_test_200_200", {}, {{"cuda:0", 200}, {"cuda:1", 200}, {"disk", kDisk}},
                     {{"linear1", true}, {"batchnorm", true}, {"linear2", true}}};
    AddModelForTest(c.spec, "");
    cases.push_back(c);
    c.name = "model_for_test_200_172_200";
    c.budgets = {{"cuda:0", 200}, {"cuda:1", 172}, {"cuda:2", 200}, {"disk", kDisk}};
    cases.push_back(c);
    // linear1.weight = linear2.weight: the model fits cuda:0 ({"": 0}).
    c.name = "model_for_test_tied";
    c.spec = {};
    AddModelForTest(c.spec, "");
    c.spec.tensors[0] = Bytes("linear1.weight", 80);
    c.spec.tied = {{"linear1.weight", "linear2.weight"}};
    c.budgets = {{"cuda:0", 200}, {"cuda:1", 200}, {"disk", kDisk}};
    c.accelerate_on_gpu = {{"", true}};
    cases.push_back(c);
  }
  {
    AccelerateCase c{"sequential_of_three", {}, {{"cuda:0", 500}, {"cuda:1", 500}, {"disk", kDisk}},
                     {{"0", true}, {"1", true}, {"2", true}}};
    for (int i = 0; i < 3; ++i) AddModelForTest(c.spec, absl::StrCat(i, "."));
    c.spec.module_classes.clear();
    cases.push_back(c);
    c.name = "sequential_of_three_no_split";
    for (int i = 0; i < 3; ++i) c.spec.module_classes[absl::StrCat(i)] = "ModelForTest";
    c.spec.no_split_classes = {"ModelForTest"};
    cases.push_back(c);
  }
  {
    // layer3.linear2.weight = layer1.linear2.weight, then layer2.linear2.weight too, then
    // layer2.linear1.weight = layer1.linear1.weight: everything on the GPUs each time.
    AccelerateCase c{"tied_layers", {}, {{"cuda:0", 400}, {"cuda:1", 500}, {"disk", kDisk}},
                     {{"", true}}};
    for (const std::string layer : {"layer1.", "layer2.", "layer3."}) AddModelForTest(c.spec, layer);
    c.spec.module_classes.clear();
    c.spec.tied = {{"layer1.linear2.weight", "layer3.linear2.weight"}};
    cases.push_back(c);
    c.name = "three_tied";
    c.spec.tied = {{"layer1.linear2.weight", "layer2.linear2.weight", "layer3.linear2.weight"}};
    cases.push_back(c);
    c.name = "two_tied_groups";
    c.spec.tied.push_back({"layer1.linear1.weight", "layer2.linear1.weight"});
    cases.push_back(c);
  }
  {
    AccelerateCase c{"ties_in_one_module", {}, {{"cuda:0", 250}, {"cuda:1", 400}, {"disk", kDisk}},
                     {{"", true}}};
    Linear(c.spec, "linear1", 4, 4);
    Linear(c.spec, "linear2", 6, 6);
    Linear(c.spec, "linear3", 4, 4);
    Linear(c.spec, "linear4", 6, 6);
    c.spec.tied = {{"linear1.weight", "linear3.weight"}, {"linear1.bias", "linear3.bias"}};
    cases.push_back(c);
  }
  {
    // compute.weight and compute.weight_submodule.parameter share a prefix and a storage; a
    // 4-byte GPU forces splitting.
    AccelerateCase c{"tied_with_shared_prefix", {}, {{"cuda:0", 4}, {"cpu", 96000}, {"disk", kDisk}},
                     {{"", false}}};
    Linear(c.spec, "compute", 3, 8);
    c.spec.tensors.push_back(Bytes("compute.weight_submodule.parameter", 96));
    c.spec.tied = {{"compute.weight", "compute.weight_submodule.parameter"}};
    cases.push_back(c);
  }
  {
    // With buffers (offload_buffers=True, no warning): only linear1 stays on cuda:0.
    AccelerateCase c{"buffers", {}, {{"cuda:0", 400}, {"cpu", 1000000000}, {"disk", kDisk}},
                     {{"linear1", true}, {"batchnorm", false}, {"linear2", false}}};
    AddModelForTest(c.spec, "", {80, 120, 120});
    cases.push_back(c);
    c.name = "buffers_two_gpus";
    Linear(c.spec, "linear3", 4, 5);
    c.spec.tensors.push_back(Bytes("linear3.test_buffer4", 80));
    c.budgets = {{"cuda:0", 400}, {"cuda:1", 400}, {"cpu", 1000000000}, {"disk", kDisk}};
    c.accelerate_on_gpu = {{"linear1", true}, {"batchnorm", true}, {"linear2", false},
                           {"linear3", false}};
    cases.push_back(c);
    c.name = "buffers_two_gpus_small_second";
    c.budgets = {{"cuda:0", 400}, {"cuda:1", 200}, {"cpu", 1000000000}, {"disk", kDisk}};
    cases.push_back(c);
  }
  {
    // fallback_allocation: module.linear2 is the one block that fits cuda:0.
    AccelerateCase c{"fallback_allocation", {}, {{"cuda:0", 256}, {"disk", kDisk}},
                     {{"module.linear1", false}, {"module.linear2", true}, {"module.linear3", false}}};
    Linear(c.spec, "module.linear1", 10, 4);
    Linear(c.spec, "module.linear2", 4, 4);
    Linear(c.spec, "module.linear3", 4, 8);
    cases.push_back(c);
  }
  {
    AccelerateCase c{"fallback_partial_fit", {}, {{"cuda:0", 5000}, {"disk", kDisk}},
                     {{"", false}}};  // Accelerate promises only "some" on cuda:0
    for (const std::string module : {"module1", "module2", "module3"}) {
      Linear(c.spec, module + ".submodule1", 20, 20);
      Linear(c.spec, module + ".submodule2", 20, 20);
    }
    cases.push_back(c);
  }
  {
    AccelerateCase c{"fallback_tied", {}, {{"cuda:0", 600}, {"disk", kDisk}}, {{"", true}}};
    Linear(c.spec, "linear1", 10, 10);
    Linear(c.spec, "linear2", 10, 10);
    c.spec.tied = {{"linear1.weight", "linear2.weight"}};
    cases.push_back(c);
  }
  {
    // fallback_allocation with buffers: batchnorm alone stays on cuda:0.
    AccelerateCase c{"fallback_buffers", {}, {{"cuda:0", 678}, {"disk", kDisk}},
                     {{"linear1", false}, {"batchnorm", true}, {"linear2", false}}};
    Linear(c.spec, "linear1", 10, 10);
    c.spec.tensors.push_back(Bytes("linear1.buffer1", 20));
    for (const std::string name : {"weight", "bias", "running_mean", "running_var"}) {
      c.spec.tensors.push_back(Bytes("batchnorm." + name, 40));
    }
    c.spec.tensors.push_back(Bytes("batchnorm.num_batches_tracked", 8));
    c.spec.tensors.push_back(Bytes("batchnorm.buffer2", 20));
    Linear(c.spec, "linear2", 10, 10);
    c.spec.tensors.push_back(Bytes("linear2.buffer3", 20));
    cases.push_back(c);
  }
  {
    // accelerate #3041: the embedding does not fit cuda:0, Accelerate moves on to cuda:1 for
    // good and spills the last layer to cpu.
    AccelerateCase c{"issue_3041", testing::DecoderSpec(4, 10, 30, 1),
                     {{"cuda:0", 25}, {"cuda:1", 60}, {"cpu", 100}, {"disk", kDisk}},
                     {{"model.embed_tokens", true}, {"model.layers.0", true},
                      {"model.layers.1", true}, {"model.layers.2", true},
                      {"model.layers.3", false}, {"model.norm", true}, {"lm_head", true}}};
    cases.push_back(c);
  }
  return cases;
}

// Bytes of Accelerate's map on GPUs: every tensor under a key marked on a GPU, tied storage
// counted once.
std::uint64_t AccelerateGpuBytes(const ModuleTree& tree, const AccelerateCase& c) {
  std::uint64_t bytes = 0;
  for (const auto& tensor : tree.tensors()) {
    const std::string* best = nullptr;
    for (const auto& [key, on_gpu] : c.accelerate_on_gpu) {
      if (IsDottedPrefix(key, tensor.name) && (best == nullptr || key.size() > best->size())) {
        best = &key;
      }
    }
    if (best != nullptr && c.accelerate_on_gpu.at(*best)) bytes += tensor.counted_bytes();
  }
  return bytes;
}

TEST(AccelerateCases, PlacerPlansEachWithAtLeastAccelerateBytesOnTheGpus) {
  for (const AccelerateCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const ModuleTree tree = BuildTree(c.spec);
    absl::StatusOr<Plan> plan = PlanPlacement(tree, Budgets(c.budgets), {});
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::uint64_t gpu_bytes = 0;
    for (const DevicePlan& device : plan->devices) {
      EXPECT_GE(device.left_bytes(), 0) << device.device.Name();
      if (device.device.is_gpu()) gpu_bytes += device.weights_bytes;
    }
    EXPECT_GE(gpu_bytes, AccelerateGpuBytes(tree, c));
    for (const auto& group : tree.tied_groups()) {
      for (int t : group) EXPECT_EQ(plan->tensor_devices[t], plan->tensor_devices[group[0]]);
    }
  }
  // Accelerate's one promise for fallback_partial_fit: something on cuda:0.
  for (const AccelerateCase& c : Cases()) {
    if (c.name != "fallback_partial_fit") continue;
    absl::StatusOr<Plan> plan = PlanPlacement(BuildTree(c.spec), Budgets(c.budgets), {});
    ASSERT_TRUE(plan.ok());
    EXPECT_GT(plan->devices[0].weights_bytes, 0u);
  }
}

}  // namespace
}  // namespace placer::placement
