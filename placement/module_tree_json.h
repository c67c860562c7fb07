// The --module-tree TREE.json schema, for planning a hypothetical model:
//   {"tensors": [{"name": "model.layers.0.mlp.up_proj.weight",
//                 "shape": [11008, 4096], "dtype": "BF16"},
//                {"name": "model.layers.0.running_mean", "shape": [4096],
//                 "dtype": "F32", "buffer": true}, ...],
//    "module_classes": {"model.layers.0": "LlamaDecoderLayer", ...},
//    "no_split": ["LlamaDecoderLayer"],
//    "tied": [["lm_head.weight", "model.embed_tokens.weight"]]}
// Only "tensors" is required. Parsing is strict: unknown fields and wrong
// types are errors naming the field (and the tensor).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/module_tree.h"

namespace placer::placement {

absl::StatusOr<ModuleTreeSpec> ParseModuleTreeJson(absl::string_view json_text,
                                                   absl::string_view file);

absl::StatusOr<ModuleTreeSpec> ReadModuleTreeFile(const std::string& path);

}  // namespace placer::placement
