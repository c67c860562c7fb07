#include "placement/module_tree.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace placer::placement {
namespace {

absl::Status CheckTensorName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a tensor has an empty name");
  if (name.front() == '.' || name.back() == '.' || absl::StrContains(name, "..")) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': empty component in dotted name"));
  }
  return absl::OkStatus();
}

// "" is the root; anything else must be a well-formed dotted name.
absl::Status CheckModuleName(absl::string_view name) {
  if (name.empty()) return absl::OkStatus();
  if (name.front() == '.' || name.back() == '.' || absl::StrContains(name, "..")) {
    return absl::InvalidArgumentError(
        absl::StrCat("module_classes: '", name, "': empty component in dotted name"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::uint64_t> TensorBytes(const TensorSpec& spec, loader::DType dtype) {
  // 2^62 bytes is far beyond any device; the bound keeps the products exact.
  constexpr std::uint64_t kLimit = 1ull << 62;
  std::uint64_t elements = 1;
  for (std::int64_t dim : spec.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", spec.name, "': negative dimension ", dim));
    }
    const auto d = static_cast<std::uint64_t>(dim);
    if (d != 0 && elements > kLimit / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", spec.name, "': shape too large"));
    }
    elements *= d;
  }
  const std::uint64_t size = loader::DTypeSize(dtype);
  if (elements > kLimit / size) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name, "': too large"));
  }
  return elements * size;
}

std::uint64_t ElementCount(const std::vector<std::int64_t>& shape) {
  std::uint64_t elements = 1;
  for (std::int64_t dim : shape) elements *= static_cast<std::uint64_t>(dim);
  return elements;
}

}  // namespace

bool IsDottedPrefix(absl::string_view prefix, absl::string_view name) {
  if (prefix.empty()) return true;
  if (!absl::StartsWith(name, prefix)) return false;
  return name.size() == prefix.size() || name[prefix.size()] == '.';
}

absl::StatusOr<ModuleTree> ModuleTree::Build(const ModuleTreeSpec& spec,
                                             std::optional<loader::DType> compute_dtype) {
  if (spec.tensors.empty()) return absl::InvalidArgumentError("the model has no tensors");
  ModuleTree tree;
  tree.modules_.push_back(Module{});
  tree.module_by_name_.emplace("", 0);

  // Pass 1: modules in order of first appearance; items hold input indices.
  std::set<std::string, std::less<>> seen_tensors;
  std::vector<int> module_of_input(spec.tensors.size());
  for (std::size_t i = 0; i < spec.tensors.size(); ++i) {
    const TensorSpec& tensor = spec.tensors[i];
    PLACER_RETURN_IF_ERROR(CheckTensorName(tensor.name));
    if (!seen_tensors.insert(tensor.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", tensor.name, "' is listed twice"));
    }
    int parent = 0;
    std::size_t dot = tensor.name.find('.');
    while (dot != std::string::npos) {
      const std::string module_name = tensor.name.substr(0, dot);
      auto [it, inserted] =
          tree.module_by_name_.emplace(module_name, static_cast<int>(tree.modules_.size()));
      if (inserted) {
        Module module;
        module.name = module_name;
        module.parent = parent;
        tree.modules_[parent].items.push_back({true, it->second});
        tree.modules_.push_back(std::move(module));
      }
      parent = it->second;
      dot = tensor.name.find('.', dot + 1);
    }
    tree.modules_[parent].items.push_back({false, static_cast<int>(i)});
    module_of_input[i] = parent;
  }
  for (const TensorSpec& tensor : spec.tensors) {
    if (tree.module_by_name_.count(tensor.name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor.name, "' is also a module: other tensors lie under it"));
    }
  }

  // Pass 2: depth-first order, so every subtree is a contiguous range.
  tree.tensors_.reserve(spec.tensors.size());
  std::vector<int> new_index(spec.tensors.size());
  std::vector<std::pair<int, std::size_t>> stack = {{0, 0}};  // module, next item
  tree.modules_[0].tensor_begin = 0;
  while (!stack.empty()) {
    auto& [module_index, next] = stack.back();
    Module& module = tree.modules_[module_index];
    if (next == module.items.size()) {
      module.tensor_end = static_cast<int>(tree.tensors_.size());
      stack.pop_back();
      continue;
    }
    Item& item = module.items[next++];
    if (item.is_module) {
      tree.modules_[item.index].tensor_begin = static_cast<int>(tree.tensors_.size());
      stack.push_back({item.index, 0});
      continue;
    }
    const TensorSpec& input = spec.tensors[item.index];
    Tensor tensor;
    tensor.name = input.name;
    tensor.shape = input.shape;
    tensor.dtype = input.dtype;
    tensor.is_buffer = input.is_buffer;
    tensor.row_lookup = input.row_lookup;
    tensor.module = module_of_input[item.index];
    const loader::DType sized_as =
        compute_dtype && loader::IsFloatingDType(input.dtype) ? *compute_dtype : input.dtype;
    absl::StatusOr<std::uint64_t> bytes = TensorBytes(input, sized_as);
    if (!bytes.ok()) return bytes.status();
    tensor.bytes = input.packed_bytes ? *input.packed_bytes : *bytes;
    new_index[item.index] = static_cast<int>(tree.tensors_.size());
    item.index = new_index[item.index];
    tree.tensor_by_name_.emplace(tensor.name, item.index);
    tree.tensors_.push_back(std::move(tensor));
  }

  for (const auto& [name, class_name] : spec.module_classes) {
    if (tree.tensor_by_name_.count(name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "module_classes: '", name, "' is a tensor of the tree, not a module"));
    }
    PLACER_RETURN_IF_ERROR(CheckModuleName(name));
    for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      if (tree.tensor_by_name_.count(name.substr(0, dot)) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("module_classes: '", name, "' lies under '",
                                                       name.substr(0, dot),
                                                       "', which is a tensor, not a module"));
      }
    }
    auto it = tree.module_by_name_.find(name);
    if (it == tree.module_by_name_.end()) {
      // Dropout, activations, rotary embeddings: every named_modules() dump lists modules that
      // own no tensor. They take no room, so there is nothing to place.
      tree.parameterless_modules_.push_back(name);
      continue;
    }
    tree.modules_[it->second].class_name = class_name;
  }
  const std::set<std::string> no_split(spec.no_split_classes.begin(),
                                       spec.no_split_classes.end());
  for (Module& module : tree.modules_) {
    module.no_split = !module.class_name.empty() && no_split.count(module.class_name) != 0;
  }
  for (const auto& [name, bytes] : spec.kv_cache_bytes) {
    auto it = tree.module_by_name_.find(name);
    if (it == tree.module_by_name_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV cache reserve for '", name, "': no such module"));
    }
    tree.modules_[it->second].kv_cache_bytes = bytes;
  }

  for (std::size_t g = 0; g < spec.tied.size(); ++g) {
    const std::vector<std::string>& names = spec.tied[g];
    const std::string label = absl::StrCat("tied group ", g, " [", absl::StrJoin(names, ", "), "]");
    if (names.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": needs at least two tensors"));
    }
    std::vector<int> members;
    for (const std::string& name : names) {
      auto it = tree.tensor_by_name_.find(name);
      if (it == tree.tensor_by_name_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(label, ": no tensor '", name, "'"));
      }
      Tensor& tensor = tree.tensors_[it->second];
      if (tensor.tied_group >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": tensor '", name, "' is already in another tied group"));
      }
      if (ElementCount(tensor.shape) != ElementCount(tree.tensors_[members.empty() ? it->second : members[0]].shape)) {
        return absl::InvalidArgumentError(absl::StrCat(
            label, ": tensor '", name, "' has a different number of elements than '",
            names[0], "'; tied tensors share one storage"));
      }
      tensor.tied_group = static_cast<int>(g);
      members.push_back(it->second);
    }
    std::sort(members.begin(), members.end());
    for (std::size_t m = 1; m < members.size(); ++m) tree.tensors_[members[m]].counted = false;
    tree.tied_groups_.push_back(std::move(members));
  }

  std::vector<std::uint64_t> prefix(tree.tensors_.size() + 1, 0);
  for (std::size_t t = 0; t < tree.tensors_.size(); ++t) {
    prefix[t + 1] = prefix[t] + tree.tensors_[t].counted_bytes();
  }
  for (Module& module : tree.modules_) {
    module.bytes = prefix[module.tensor_end] - prefix[module.tensor_begin];
  }
  return tree;
}

std::optional<int> ModuleTree::FindModule(absl::string_view name) const {
  auto it = module_by_name_.find(name);
  if (it == module_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<int> ModuleTree::FindTensor(absl::string_view name) const {
  auto it = tensor_by_name_.find(name);
  if (it == tensor_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<int> ModuleTree::NoSplitAncestor(int tensor) const {
  std::optional<int> outermost;
  for (int m = tensors_[tensor].module; m >= 0; m = modules_[m].parent) {
    if (modules_[m].no_split) outermost = m;
  }
  return outermost;
}

}  // namespace placer::placement
