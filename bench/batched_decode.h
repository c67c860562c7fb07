// Continuous batching's decode step without the server: `batch` sequences advanced together
// by one ExtendBatch per step, in process. Beside placer-bench-grpc's `generate --streams N`
// it splits a batched step into the model's share and the serving path's (handler threads,
// gRPC writes, the client).
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "model/causal_lm.h"

namespace placer::bench {

// Prefills `batch` different prompts of `prompt_tokens` ids (one ExtendBatch, untimed), then
// runs `new_tokens` - 1 greedy steps of all of them together, each step timed. The first of
// `runs` + 1 runs warms up and is not counted. Returns {"batch", "step_seconds" (Summary of
// every counted step), "tokens_per_second" (batch / median step), "runs": [{"step_seconds",
// "tokens": per sequence}]}; greedy tokens make a run comparable across builds.
absl::StatusOr<nlohmann::json> MeasureBatchedDecode(const model::CausalLm& lm, int batch,
                                                    int prompt_tokens, int new_tokens, int runs);

}  // namespace placer::bench
