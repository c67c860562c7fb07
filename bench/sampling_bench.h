// What picking a token costs the engine thread (model/sampler.h): Sampler::Next over a row of
// seeded random logits of a vocabulary's size, per sampling setting, beside what the sampler
// avoids (std::max_element for greedy, sorting the vocabulary for top-p).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace placer::bench {

// Microseconds per token (median of `runs` runs of `tokens` tokens each) for greedy,
// temperature alone, top-k 40, top-p 0.9, top-k 40 with top-p 0.95, greedy with logprobs and
// top-p 0.9 on near-flat logits;
// and per row for std::max_element and std::sort of the vocabulary's ids by logit.
nlohmann::json MeasureSampling(int64_t vocab, int tokens, int runs);

}  // namespace placer::bench
