// A placerd rank other than the leader: grpc.health.v1 on --listen (NOT_SERVING until its
// share is loaded and every stage is up), no model APIs; it runs its decoder layers for the
// leader's steps until the group goes away.
#pragma once

#include "server/flags.h"

namespace placer::server {

// The process's exit code: non-zero once the group is gone (the leader or a neighbour stopped
// answering), or when joining or loading failed (the log says why).
int RunStageWorker(const DaemonOptions& options);

}  // namespace placer::server
