// What a request leaves unset is taken from the checkpoint's generation_config.json (as
// transformers' GenerationConfig does), then from these built-in defaults.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/sampler.h"

namespace placer::loader {
class Checkpoint;
}

namespace placer::model {

struct GenerationDefaults {
  uint32_t max_new_tokens = 16;
  SamplingParams sampling;        // greedy unless generation_config.json says do_sample
  std::vector<int32_t> eos_token_ids;
};

// INVALID_ARGUMENT naming the generation_config.json field when one is of the wrong type or
// out of range (a negative max_new_tokens, an eos id beyond int32, top_p above 1).
absl::StatusOr<GenerationDefaults> ReadGenerationDefaults(const loader::Checkpoint& checkpoint);

}  // namespace placer::model
