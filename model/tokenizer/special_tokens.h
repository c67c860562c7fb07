// Which special tokens Encode(..., add_special_tokens=true) puts around the text: from
// tokenizer_config.json's add_bos_token / add_eos_token when it has them (as transformers'
// Llama tokenizers rebuild their template from those flags), else from tokenizer.json's
// post_processor (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/bpe_model.h"

namespace placer::tokenizer {

struct SpecialTokens {
  std::vector<std::int32_t> prefix;  // before the text's ids
  std::vector<std::int32_t> suffix;  // after them
  std::optional<std::int32_t> bos_id;
  std::optional<std::int32_t> eos_id;
};

// `tokenizer_config` may be null (no tokenizer_config.json).
absl::StatusOr<SpecialTokens> ReadSpecialTokens(const nlohmann::json& tokenizer_json,
                                                const nlohmann::json& tokenizer_config,
                                                const AddedTokens& added, const BpeModel& model);

}  // namespace placer::tokenizer
