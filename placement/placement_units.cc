#include "placement/placement_units.h"

#include <algorithm>
#include <numeric>

namespace placer::placement {
namespace {

int Find(std::vector<int>& parent, int x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

}  // namespace

PlacementUnits PlacementUnits::FromTree(const ModuleTree& tree) {
  const auto& tensors = tree.tensors();
  const auto& modules = tree.modules();
  PlacementUnits out;
  out.unit_of_tensor.assign(tensors.size(), -1);

  // Tensors are depth-first, so a no-split block is one contiguous run.
  for (int t = 0; t < static_cast<int>(tensors.size());) {
    PlacementUnit unit;
    if (std::optional<int> block = tree.NoSplitAncestor(t)) {
      const auto& module = modules[*block];
      unit.name = module.name;
      unit.tensor_begin = module.tensor_begin;
      unit.tensor_end = module.tensor_end;
    } else {
      unit.name = tensors[t].name;
      unit.tensor_begin = t;
      unit.tensor_end = t + 1;
    }
    for (int i = unit.tensor_begin; i < unit.tensor_end; ++i) {
      unit.weights_bytes += tensors[i].counted_bytes();
      out.unit_of_tensor[i] = static_cast<int>(out.units.size());
    }
    t = unit.tensor_end;
    out.units.push_back(std::move(unit));
  }
  // A module's KV cache goes with the unit holding its first tensor (the
  // block itself for a no-split decoder layer).
  for (const auto& module : modules) {
    if (module.kv_cache_bytes == 0 || module.tensor_begin == module.tensor_end) continue;
    out.units[out.unit_of_tensor[module.tensor_begin]].kv_bytes += module.kv_cache_bytes;
  }

  std::vector<int> parent(out.units.size());
  std::iota(parent.begin(), parent.end(), 0);
  for (const auto& group : tree.tied_groups()) {
    const int first = Find(parent, out.unit_of_tensor[group[0]]);
    for (int member : group) parent[Find(parent, out.unit_of_tensor[member])] = first;
  }
  std::vector<int> group_of_root(out.units.size(), -1);
  for (int u = 0; u < static_cast<int>(out.units.size()); ++u) {
    const int root = Find(parent, u);
    if (group_of_root[root] < 0) {
      group_of_root[root] = static_cast<int>(out.groups.size());
      out.groups.emplace_back();
    }
    UnitGroup& group = out.groups[group_of_root[root]];
    out.units[u].group = group_of_root[root];
    group.units.push_back(u);
    group.weights_bytes += out.units[u].weights_bytes;
    group.kv_bytes += out.units[u].kv_bytes;
    for (int t = out.units[u].tensor_begin; t < out.units[u].tensor_end; ++t) {
      group.staged_when_offloaded |= !tensors[t].row_lookup;
    }
  }

  out.unit_begin.resize(modules.size());
  out.unit_end.resize(modules.size());
  out.tied_groups_touching.resize(modules.size());
  for (std::size_t m = 0; m < modules.size(); ++m) {
    const auto& module = modules[m];
    if (module.tensor_begin == module.tensor_end) {
      out.unit_begin[m] = out.unit_end[m] = 0;
      continue;
    }
    out.unit_begin[m] = out.unit_of_tensor[module.tensor_begin];
    out.unit_end[m] = out.unit_of_tensor[module.tensor_end - 1] + 1;
  }
  // Walk each tied unit up its ancestors; cost is depth x tied units.
  for (int g = 0; g < static_cast<int>(out.groups.size()); ++g) {
    if (out.groups[g].units.size() < 2) continue;
    for (int u : out.groups[g].units) {
      for (int m = tensors[out.units[u].tensor_begin].module; m >= 0; m = modules[m].parent) {
        auto& touching = out.tied_groups_touching[m];
        if (touching.empty() || touching.back() != g) touching.push_back(g);
      }
    }
  }
  return out;
}

}  // namespace placer::placement
