#include "placement/module_tree_json.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "loader/file_util.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace placer::placement {
namespace {

using nlohmann::json;

// The strings of an array, each checked.
absl::StatusOr<std::vector<std::string>> StringArray(const json& array, absl::string_view file,
                                                     const std::string& path) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < array.size(); ++i) {
    const std::string element = IndexJsonPath(path, i);
    PLACER_ASSIGN_OR_RETURN(std::string text, JsonAsString(array[i], {file, element}));
    out.push_back(std::move(text));
  }
  return out;
}

absl::StatusOr<TensorSpec> ParseTensor(const json& entry, absl::string_view file,
                                       const std::string& path) {
  const JsonWhere where{file, path};
  TensorSpec tensor;
  PLACER_ASSIGN_OR_RETURN(tensor.name, ReadStringField(entry, where, "name"));
  // Errors past the name say which tensor too: paths alone are indices.
  const std::string of_tensor = absl::StrCat(" (tensor '", tensor.name, "')");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (it.key() != "name" && it.key() != "shape" && it.key() != "dtype" &&
        it.key() != "buffer") {
      return JsonError({file, JoinJsonPath(path, it.key())},
                       absl::StrCat("unknown field (fields: name, shape, dtype, buffer)",
                                    of_tensor));
    }
  }
  PLACER_ASSIGN_OR_RETURN(const json* shape, ReadArrayField(entry, where, "shape"));
  const std::string shape_path = JoinJsonPath(path, "shape");
  for (std::size_t i = 0; i < shape->size(); ++i) {
    const std::string dim_path = IndexJsonPath(shape_path, i);
    PLACER_ASSIGN_OR_RETURN(const std::int64_t dim, JsonAsInt((*shape)[i], {file, dim_path}));
    if (dim < 0) {
      return JsonError({file, dim_path},
                       absl::StrCat("must not be negative, got ", dim, of_tensor));
    }
    tensor.shape.push_back(dim);
  }
  PLACER_ASSIGN_OR_RETURN(const std::string dtype, ReadStringField(entry, where, "dtype"));
  absl::StatusOr<loader::DType> parsed = loader::ParseDType(dtype);
  if (!parsed.ok()) {
    return JsonError({file, JoinJsonPath(path, "dtype")},
                     absl::StrCat(parsed.status().message(), of_tensor));
  }
  tensor.dtype = *parsed;
  PLACER_ASSIGN_OR_RETURN(tensor.is_buffer, ReadBoolField(entry, where, "buffer", false));
  return tensor;
}

}  // namespace

absl::StatusOr<ModuleTreeSpec> ParseModuleTreeJson(absl::string_view json_text,
                                                   absl::string_view file) {
  const json root = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (root.is_discarded()) return JsonError({file, ""}, "not valid JSON");
  const JsonWhere top{file, ""};
  if (!root.is_object()) return JsonError(top, "expected an object at the top level");
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() != "tensors" && it.key() != "module_classes" && it.key() != "no_split" &&
        it.key() != "tied") {
      return JsonError({file, it.key()},
                       "unknown field (fields: tensors, module_classes, no_split, tied)");
    }
  }
  ModuleTreeSpec spec;
  PLACER_ASSIGN_OR_RETURN(const json* tensors, ReadArrayField(root, top, "tensors"));
  if (tensors->empty()) return JsonError({file, "tensors"}, "lists no tensors");
  for (std::size_t i = 0; i < tensors->size(); ++i) {
    PLACER_ASSIGN_OR_RETURN(TensorSpec tensor,
                            ParseTensor((*tensors)[i], file, IndexJsonPath("tensors", i)));
    spec.tensors.push_back(std::move(tensor));
  }
  PLACER_ASSIGN_OR_RETURN(const json* classes, FindJsonField(root, top, "module_classes"));
  if (classes != nullptr) {
    PLACER_ASSIGN_OR_RETURN(classes, ReadObjectField(root, top, "module_classes"));
    for (auto it = classes->begin(); it != classes->end(); ++it) {
      // Module names hold dots: the key is quoted in the path.
      const std::string path = absl::StrCat("module_classes.\"", it.key(), "\"");
      PLACER_ASSIGN_OR_RETURN(spec.module_classes[it.key()],
                              JsonAsString(it.value(), {file, path}));
    }
  }
  PLACER_ASSIGN_OR_RETURN(const json* no_split, FindJsonField(root, top, "no_split"));
  if (no_split != nullptr) {
    PLACER_ASSIGN_OR_RETURN(no_split, ReadArrayField(root, top, "no_split"));
    PLACER_ASSIGN_OR_RETURN(spec.no_split_classes, StringArray(*no_split, file, "no_split"));
  }
  PLACER_ASSIGN_OR_RETURN(const json* tied, FindJsonField(root, top, "tied"));
  if (tied != nullptr) {
    PLACER_ASSIGN_OR_RETURN(tied, ReadArrayField(root, top, "tied"));
    for (std::size_t g = 0; g < tied->size(); ++g) {
      const std::string path = IndexJsonPath("tied", g);
      if (!(*tied)[g].is_array()) {
        return JsonError({file, path}, absl::StrCat("expected an array of tensor names, got ",
                                                    (*tied)[g].type_name()));
      }
      PLACER_ASSIGN_OR_RETURN(std::vector<std::string> names,
                              StringArray((*tied)[g], file, path));
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
