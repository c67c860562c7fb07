// What a pipeline stage other than the leader does all its life: receive a step from the
// previous stage, run its decoder layers over it (DecoderOnlyModel::RunStage), pass the hidden
// states on to the next stage (the leader, after the last one), and keep the next stage alive
// with heartbeats while it computes or idles.
#pragma once

#include "absl/status/status.h"
#include "model/causal_lm.h"
#include "runtime/stage_link.h"

namespace placer::model {

// Returns only when the group is gone: the previous stage stopped answering or the next one
// cannot be reached (UNAVAILABLE naming it). A step that fails here is passed on as failed.
// Its pool mirrors the KV blocks in use that every message carries from the leader; it
// receives into pinned host memory when its layers compute on a real GPU.
absl::Status ServeStageSteps(const CausalLm& model, runtime::StageLink& link);

// The leader's side: every message it sends carries its pool's blocks in use, and the
// answers arrive in pinned host memory when it computes on a real GPU. Before its link sends
// or receives anything (the pipeline's start).
absl::Status PrepareLeaderLink(const CausalLm& model, runtime::StageLink& link);

}  // namespace placer::model
