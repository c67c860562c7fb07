// Small builders for placement tests: tensors of exact byte sizes (U8, one
// dimension) and budgets of exact limits, so expectations are plain numbers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "placement/budget.h"
#include "placement/module_tree.h"

namespace placer::placement::testing {

inline TensorSpec Bytes(const std::string& name, std::int64_t bytes) {
  return TensorSpec{name, {bytes}, loader::DType::kU8, false};
}

// A decoder: embed, `layers` no-split layers of two tensors, norm, lm_head.
inline ModuleTreeSpec DecoderSpec(int layers, std::int64_t layer_bytes, std::int64_t embed_bytes,
                                  std::int64_t head_bytes, bool tied = false) {
  ModuleTreeSpec spec;
  spec.tensors.push_back(Bytes("model.embed_tokens.weight", embed_bytes));
  for (int i = 0; i < layers; ++i) {
    const std::string layer = absl::StrCat("model.layers.", i);
    spec.tensors.push_back(Bytes(layer + ".mlp.weight", layer_bytes - layer_bytes / 4));
    spec.tensors.push_back(Bytes(layer + ".attn.weight", layer_bytes / 4));
    spec.module_classes[layer] = "Layer";
  }
  spec.tensors.push_back(Bytes("model.norm.weight", 1));
  spec.tensors.push_back(Bytes("lm_head.weight", tied ? embed_bytes : head_bytes));
  spec.no_split_classes = {"Layer"};
  if (tied) spec.tied = {{"lm_head.weight", "model.embed_tokens.weight"}};
  return spec;
}

inline ModuleTree BuildTree(const ModuleTreeSpec& spec) {
  absl::StatusOr<ModuleTree> tree = ModuleTree::Build(spec, std::nullopt);
  EXPECT_TRUE(tree.ok()) << tree.status();
  return *std::move(tree);
}

// {"cuda:0", 100}, {"cpu", 1000}, {"disk", 10000}: limits in bytes.
inline std::vector<DeviceBudget> Budgets(
    const std::vector<std::pair<std::string, std::uint64_t>>& limits) {
  std::vector<DeviceBudget> budgets;
  for (const auto& [name, bytes] : limits) {
    DeviceBudget budget;
    budget.info.device = *ParseDevice(name);
    budget.info.total_bytes = budget.info.free_bytes = bytes;
    budget.limit_bytes = bytes;
    budgets.push_back(budget);
  }
  return budgets;
}

}  // namespace placer::placement::testing
