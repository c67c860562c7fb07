// The module tree (DESIGN.md): dotted module names built from tensor names,
// each module owning its direct tensors and its children, in the order they
// first appear (the model's execution order). Sizes are in the compute
// dtype; a tied group's storage is counted once, on its first member.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/dtype.h"

namespace placer::placement {

struct TensorSpec {
  std::string name;  // "model.layers.0.mlp.up_proj.weight"
  std::vector<std::int64_t> shape;
  loader::DType dtype = loader::DType::kF32;
  bool is_buffer = false;
  // Read a few rows per call (an embedding): offloaded, it is looked up where it lives and
  // takes no staging room. Architecture knowledge, not part of the --module-tree JSON.
  bool row_lookup = false;
  // Quantized (--quantize): the bytes of its packed form, whatever the compute dtype.
  std::optional<std::uint64_t> packed_bytes = std::nullopt;
};

// Everything a tree is built from; the --module-tree JSON holds exactly the
// first four fields.
struct ModuleTreeSpec {
  std::vector<TensorSpec> tensors;
  std::map<std::string, std::string> module_classes;  // module -> class
  std::vector<std::string> no_split_classes;
  std::vector<std::vector<std::string>> tied;  // tensor names sharing storage
  // Bytes a module needs on the device it runs on besides its weights: the
  // KV cache of a decoder layer. Keys must be modules of the tree.
  std::map<std::string, std::uint64_t> kv_cache_bytes;
};

// True when `name` is `prefix` or lies under it ("a.b" is under "a", "ab"
// is not). The empty prefix (the root) contains everything.
bool IsDottedPrefix(absl::string_view prefix, absl::string_view name);

class ModuleTree {
 public:
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    loader::DType dtype = loader::DType::kF32;  // as stored
    bool is_buffer = false;
    bool row_lookup = false;    // see TensorSpec
    int module = 0;             // owning module
    std::uint64_t bytes = 0;    // in the compute dtype
    bool counted = true;        // false for the 2nd+ member of a tied group
    int tied_group = -1;        // index into tied_groups()
    std::uint64_t counted_bytes() const { return counted ? bytes : 0; }
  };
  struct Item {  // a module's direct tensor or child module, in order
    bool is_module = false;
    int index = 0;
  };
  struct Module {
    std::string name;  // "" for the root
    int parent = -1;
    std::string class_name;
    bool no_split = false;
    std::vector<Item> items;
    // The subtree's tensors are tensors()[tensor_begin, tensor_end).
    int tensor_begin = 0;
    int tensor_end = 0;
    std::uint64_t bytes = 0;  // counted bytes of the subtree
    std::uint64_t kv_cache_bytes = 0;
  };

  // Validates the spec; every error names the tensor, module or group.
  // `compute_dtype` converts floating tensors; unset keeps stored dtypes.
  static absl::StatusOr<ModuleTree> Build(const ModuleTreeSpec& spec,
                                          std::optional<loader::DType> compute_dtype);

  // modules()[0] is the root; tensors() is in depth-first order.
  const std::vector<Module>& modules() const { return modules_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<std::vector<int>>& tied_groups() const { return tied_groups_; }
  std::uint64_t total_bytes() const { return modules_[0].bytes; }

  std::optional<int> FindModule(absl::string_view name) const;
  std::optional<int> FindTensor(absl::string_view name) const;
  // The outermost no-split module containing the tensor, if any.
  std::optional<int> NoSplitAncestor(int tensor) const;
  // module_classes entries that own no tensor (dropout, activations): accepted, never placed.
  const std::vector<std::string>& parameterless_modules() const { return parameterless_modules_; }

 private:
  std::vector<Module> modules_;
  std::vector<Tensor> tensors_;
  std::vector<std::vector<int>> tied_groups_;
  std::vector<std::string> parameterless_modules_;
  std::map<std::string, int, std::less<>> module_by_name_;
  std::map<std::string, int, std::less<>> tensor_by_name_;
};

}  // namespace placer::placement
