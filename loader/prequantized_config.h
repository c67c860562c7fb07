// The `quantization_config` of a pre-quantized Hugging Face checkpoint (config.json, or a
// GPTQ checkpoint's quantize_config.json), validated field by field into the one thing the
// loader needs: which stored format each decoder-layer linear weight has, so that it can be
// repacked into placer's packed layout (loader/quantized_layout.h) at load. Torch-free (the
// planner sizes with it; the config fuzzer parses it).
//
// Accepted (anything else is an error naming the file, the field and why):
//   GPTQ (quant_method "gptq"): bits 4 or 8, group_size > 0 or -1 (one group per column),
//     sym, desc_act (served when g_idx keeps inputs in group order; a permuted g_idx is
//     refused at load), checkpoint_format "gptq" (v1: zeros stored minus one, the default)
//     or "gptq_v2"; lm_head false; modules_in_block_to_quantize and GPTQModel's dynamic "-:"
//     keys leave some linears unquantized; a positive dynamic key ("+:REGEX" or "REGEX")
//     overrides bits, group_size, sym or desc_act for the linears its regex matches (two
//     matching one linear are refused; a "-:" key matching it too wins: its tensors then say
//     if GPTQModel, which takes the first key in file order, decided otherwise).
//   AWQ (quant_method "awq"): bits 4, version "gemm", zero_point true, group_size > 0;
//     modules_to_not_convert.
//   compressed-tensors (quant_method "compressed-tensors"): format "pack-quantized" (int4 or
//     int8 weights, "group" or "channel" strategy) or "int-quantized" (int8 weights, channel
//     strategy; dynamic int8 activations are served in the compute dtype), or "mixed-precision"
//     with each config group naming its own; ignore (names and "re:" patterns). Config groups
//     target linears by class ("Linear"), full module name or "re:" pattern; a linear named by
//     a group's names or patterns takes that group, else the group targeting "Linear", else it
//     is stored float (compressed-tensors' and vLLM's precedence). Two groups claiming one
//     linear at the same precedence are refused, naming both: placer does not rely on JSON
//     key order.
// The linears a checkpoint leaves unquantized (loader/unquantized_modules.h) are plain float
// `.weight`s, served in the compute dtype like the embeddings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/unquantized_modules.h"

namespace placer::loader {

enum class PrequantizedMethod { kGptq, kAwq, kCompressedPacked, kCompressedInt };

struct PrequantizedFormat;

// One format among several of a checkpoint that does not quantize every linear alike (a
// compressed-tensors config group, a GPTQModel `dynamic` override): the format and the
// decoder-layer linears it selects.
struct TargetedFormat {
  std::string name;      // "attention", "+:.*down_proj" (Describe)
  std::string selector;  // the field that selects: "quantization_config.config_groups.a.targets"
  std::string targets;   // what it selects as written, for Describe()
  // The module names and "re:" patterns it names, matched as compressed-tensors `ignore`
  // entries are (GPTQModel's regexes as "re:", both re.match).
  UnquantizedModules named;
  bool every_linear = false;  // "Linear" among the targets
  std::shared_ptr<const PrequantizedFormat> format;
};

struct PrequantizedFormat {
  PrequantizedMethod method = PrequantizedMethod::kGptq;
  int bits = 4;
  // Inputs per scale; 0 = one group over all inputs (GPTQ -1, compressed-tensors "channel").
  std::int64_t group_size = 0;
  bool symmetric = true;
  // Activation order: g_idx may put inputs in groups in any order (GPTQ desc_act,
  // compressed-tensors actorder "group", whose g_idx is weight_g_idx).
  bool desc_act = false;
  bool zeros_minus_one = true;      // GPTQ v1 ("gptq"); false for "gptq_v2"
  // compressed-tensors int-quantized: int8 activations the checkpoint was calibrated for,
  // which placer leaves in the compute dtype (logged).
  bool dynamic_int8_activations = false;
  // GPTQ `lm_head: true` (GPTQModel): the untied lm_head is stored quantized like the layers'
  // linears (lm_head.qweight, ...).
  bool quantized_lm_head = false;
  // The file the config came from; a group's adds the field that selects it
  // ("config.json quantization_config.config_groups.attention").
  std::string source;
  UnquantizedModules unquantized;   // decoder-layer linears stored as float weights
  // Several formats: compressed-tensors groups other than one targeting every linear, or GPTQ
  // with `dynamic` overrides (then the first, targeting every linear, is the fields above).
  // Each linear's format is its group's; the fields above (but `source` and `unquantized`) are
  // the first group's. Empty: every quantized linear is stored in this format.
  std::vector<TargetedFormat> groups;

  // The format decoder-layer linear `module` ("model.layers.0.mlp.down_proj") is stored in:
  // this one, or its config group's; nullptr when it is stored as a float weight (left out
  // by `unquantized`, or targeted by no group). An error names the two groups when two claim
  // it at the same precedence.
  absl::StatusOr<const PrequantizedFormat*> ForModule(absl::string_view module) const;
  // Why decoder-layer linear `module` is stored as a float weight, for errors: the field that
  // leaves it out ("quantization_config.ignore [...]") or that no config group targets it;
  // "" when it is stored quantized.
  std::string WhyFloat(absl::string_view module) const;

  // "GPTQ 4-bit (groups of 128, v1 zeros)", for logs, plans and the offload store's scheme;
  // with several config groups each group's, with its targets.
  std::string Describe() const;
};

// `config` is the quantization_config object (or all of quantize_config.json); `file` and
// `path` name where it sits for errors ("config.json", "quantization_config").
absl::StatusOr<PrequantizedFormat> ParsePrequantizedFormat(const nlohmann::json& config,
                                                           absl::string_view file,
                                                           absl::string_view path);

// quantize_config.json's text (AutoGPTQ writes it next to config.json; its quant_method may
// be absent, meaning GPTQ).
absl::StatusOr<PrequantizedFormat> ParseQuantizeConfigFile(absl::string_view json_text,
                                                           absl::string_view file);

}  // namespace placer::loader
