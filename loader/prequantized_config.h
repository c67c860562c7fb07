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
//     keys leave some linears unquantized (a dynamic key overriding bits etc. is refused).
//   AWQ (quant_method "awq"): bits 4, version "gemm", zero_point true, group_size > 0;
//     modules_to_not_convert.
//   compressed-tensors (quant_method "compressed-tensors"): format "pack-quantized" (int4 or
//     int8 weights, "group" or "channel" strategy) or "int-quantized" (int8 weights, channel
//     strategy; dynamic int8 activations are served in the compute dtype), one config group
//     targeting "Linear", ignore (names and "re:" patterns).
// The linears a checkpoint leaves unquantized (loader/unquantized_modules.h) are plain float
// `.weight`s, served in the compute dtype like the embeddings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/unquantized_modules.h"

namespace placer::loader {

enum class PrequantizedMethod { kGptq, kAwq, kCompressedPacked, kCompressedInt };

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
  std::string source;               // the file the config came from
  UnquantizedModules unquantized;   // decoder-layer linears stored as float weights

  // "GPTQ 4-bit (groups of 128, v1 zeros)", for logs, plans and the offload store's scheme.
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
