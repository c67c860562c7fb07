#include "placement/module_tree_json.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "loader/file_util.h"
#include "base/status_macros.h"

namespace placer::placement {
namespace {

using nlohmann::json;

absl::Status Error(absl::string_view file, absl::string_view where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", where, ": ", why));
}

absl::StatusOr<TensorSpec> ParseTensor(const json& entry, std::size_t index,
                                       absl::string_view file) {
  std::string where = absl::StrCat("tensors[", index, "]");
  if (!entry.is_object()) return Error(file, where, "must be an object");
  TensorSpec tensor;
  auto name = entry.find("name");
  if (name == entry.end() || !name->is_string()) {
    return Error(file, where, "\"name\" must be a string");
  }
  tensor.name = name->get<std::string>();
  where = absl::StrCat(where, " '", tensor.name, "'");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (it.key() != "name" && it.key() != "shape" && it.key() != "dtype" &&
        it.key() != "buffer") {
      return Error(file, where,
                   absl::StrCat("unknown field \"", it.key(),
                                "\" (fields: name, shape, dtype, buffer)"));
    }
  }
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return Error(file, where, "\"shape\" must be an array of non-negative integers");
  }
  for (const json& dim : *shape) {
    if (!dim.is_number_integer() || dim.get<std::int64_t>() < 0) {
      return Error(file, where, absl::StrCat("\"shape\" entry ", dim.dump(),
                                             " is not a non-negative integer"));
    }
    tensor.shape.push_back(dim.get<std::int64_t>());
  }
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return Error(file, where, "\"dtype\" must be a string such as \"BF16\"");
  }
  absl::StatusOr<loader::DType> parsed = loader::ParseDType(dtype->get<std::string>());
  if (!parsed.ok()) return Error(file, where, parsed.status().message());
  tensor.dtype = *parsed;
  auto buffer = entry.find("buffer");
  if (buffer != entry.end()) {
    if (!buffer->is_boolean()) return Error(file, where, "\"buffer\" must be true or false");
    tensor.is_buffer = buffer->get<bool>();
  }
  return tensor;
}

}  // namespace

absl::StatusOr<ModuleTreeSpec> ParseModuleTreeJson(absl::string_view json_text,
                                                   absl::string_view file) {
  const json root = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (root.is_discarded()) return Error(file, "top level", "not valid JSON");
  if (!root.is_object()) return Error(file, "top level", "must be a JSON object");
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() != "tensors" && it.key() != "module_classes" && it.key() != "no_split" &&
        it.key() != "tied") {
      return Error(file, absl::StrCat("field \"", it.key(), "\""),
                   "unknown (fields: tensors, module_classes, no_split, tied)");
    }
  }
  ModuleTreeSpec spec;
  auto tensors = root.find("tensors");
  if (tensors == root.end() || !tensors->is_array() || tensors->empty()) {
    return Error(file, "\"tensors\"", "required: a non-empty array of tensors");
  }
  for (std::size_t i = 0; i < tensors->size(); ++i) {
    PLACER_ASSIGN_OR_RETURN(TensorSpec tensor, ParseTensor((*tensors)[i], i, file));
    spec.tensors.push_back(std::move(tensor));
  }
  if (auto classes = root.find("module_classes"); classes != root.end()) {
    if (!classes->is_object()) {
      return Error(file, "\"module_classes\"", "must be an object of module -> class name");
    }
    for (auto it = classes->begin(); it != classes->end(); ++it) {
      if (!it.value().is_string()) {
        return Error(file, absl::StrCat("\"module_classes\" '", it.key(), "'"),
                     "class name must be a string");
      }
      spec.module_classes[it.key()] = it.value().get<std::string>();
    }
  }
  if (auto no_split = root.find("no_split"); no_split != root.end()) {
    if (!no_split->is_array()) {
      return Error(file, "\"no_split\"", "must be an array of class names");
    }
    for (const json& name : *no_split) {
      if (!name.is_string()) {
        return Error(file, "\"no_split\"", absl::StrCat(name.dump(), " is not a class name"));
      }
      spec.no_split_classes.push_back(name.get<std::string>());
    }
  }
  if (auto tied = root.find("tied"); tied != root.end()) {
    if (!tied->is_array()) return Error(file, "\"tied\"", "must be an array of name arrays");
    for (std::size_t g = 0; g < tied->size(); ++g) {
      const json& group = (*tied)[g];
      const std::string where = absl::StrCat("\"tied\"[", g, "]");
      if (!group.is_array()) return Error(file, where, "must be an array of tensor names");
      std::vector<std::string> names;
      for (const json& name : group) {
        if (!name.is_string()) {
          return Error(file, where, absl::StrCat(name.dump(), " is not a tensor name"));
        }
        names.push_back(name.get<std::string>());
      }
      spec.tied.push_back(std::move(names));
    }
  }
  return spec;
}

absl::StatusOr<ModuleTreeSpec> ReadModuleTreeFile(const std::string& path) {
  PLACER_ASSIGN_OR_RETURN(std::string text, loader::ReadSmallFile(path));
  return ParseModuleTreeJson(text, path);
}

}  // namespace placer::placement
