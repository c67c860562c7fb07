// The indivisible pieces the planner moves: a no-split block (its outermost
// no-split module) or a single tensor outside any no-split block. Pieces that
// share a tied tensor form one group and always land on one device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "placement/module_tree.h"

namespace placer::placement {

struct PlacementUnit {
  std::string name;  // the no-split module or the tensor
  int tensor_begin = 0;
  int tensor_end = 0;
  std::uint64_t weights_bytes = 0;  // counted bytes (tied copies count 0)
  std::uint64_t kv_bytes = 0;
  int group = 0;
};

struct UnitGroup {
  std::vector<int> units;  // ascending
  std::uint64_t weights_bytes = 0;
  std::uint64_t kv_bytes = 0;
  // Offloaded, the group is staged onto the execution device: false when every tensor is a
  // row lookup (an untied embedding), which runs where it lives.
  bool staged_when_offloaded = false;
};

struct PlacementUnits {
  std::vector<PlacementUnit> units;  // in tensor (execution) order
  std::vector<int> unit_of_tensor;
  std::vector<UnitGroup> groups;
  // Per module: its units are units[unit_begin[m], unit_end[m]).
  std::vector<int> unit_begin;
  std::vector<int> unit_end;
  // Per module: groups with more than one unit that touch its subtree.
  std::vector<std::vector<int>> tied_groups_touching;

  static PlacementUnits FromTree(const ModuleTree& tree);
};

}  // namespace placer::placement
