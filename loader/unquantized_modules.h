// Which linear modules of a pre-quantized checkpoint its tool left unquantized (stored as a
// plain float `.weight`), read from quantization_config with the rule that tool applies to a
// module's full Hugging Face name ("model.layers.0.mlp.down_proj"):
//   AWQ `modules_to_not_convert`: a name containing any entry (transformers' substring test);
//   GPTQ `modules_in_block_to_quantize` (lists of names inside a block): a name ending in none
//     of the entries (optimum's `endswith` test);
//   GPTQModel `dynamic` keys "-:REGEX": a name the regex matches from its start (re.match);
//   compressed-tensors `ignore`: a name equal to an entry, or matched from its start by an
//     entry "re:REGEX"; the class name "Linear" matches every linear.
// Regexes are RE2 (linear time whatever the pattern: they come from outside bytes); one
// Python's `re` accepts and RE2 does not (lookaround, backreferences) is an error naming it.
// Torch-free (the planner and the config fuzzer parse it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/json_fields.h"

namespace re2 {
class RE2;
}

namespace placer::loader {

class UnquantizedModules {
 public:
  // Nothing is left unquantized.
  UnquantizedModules() = default;

  // `value` is the field's value (non-null); `where` names the field itself in errors.
  static absl::StatusOr<UnquantizedModules> FromAwqNotConverted(const nlohmann::json& value,
                                                                JsonWhere where);
  static absl::StatusOr<UnquantizedModules> FromGptqBlockModules(const nlohmann::json& value,
                                                                 JsonWhere where);
  // GPTQModel's `dynamic`: "-:" keys skip modules (positive keys' overrides of bits, group
  // size... are read by prequantized_config.h; every key's regex is checked here).
  static absl::StatusOr<UnquantizedModules> FromGptqDynamic(const nlohmann::json& value,
                                                            JsonWhere where);
  static absl::StatusOr<UnquantizedModules> FromCompressedTensorsIgnore(const nlohmann::json& value,
                                                                        JsonWhere where);

  // Both sets' modules (GPTQ may name some in modules_in_block_to_quantize, more in dynamic).
  void Add(UnquantizedModules other);

  // True when `module` (a full name, no ".weight") is stored unquantized.
  bool Covers(absl::string_view module) const;
  bool empty() const { return float_rules_.empty() && !has_quantized_suffixes_; }
  // The field's path and its entries as the checkpoint wrote them, for logs and errors:
  // "quantization_config.modules_to_not_convert [\"o_proj\"]".
  const std::string& description() const { return description_; }

 private:
  enum class Match { kContains, kRegexFromStart, kEquals, kEveryLinear };
  struct Rule {
    Match match;
    std::string text;
    std::shared_ptr<const re2::RE2> regex;  // kRegexFromStart
  };
  static absl::StatusOr<Rule> RegexRule(const std::string& pattern, JsonWhere where);

  std::vector<Rule> float_rules_;  // unquantized when any matches
  // GPTQ's list: when there is one, unquantized when no entry ends the name.
  bool has_quantized_suffixes_ = false;
  std::vector<std::string> quantized_suffixes_;
  std::string description_;
};

}  // namespace placer::loader
