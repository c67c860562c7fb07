// Flags of a pipeline group (DESIGN words: stage): --stages, --stage-rank, --rendezvous,
// --stage-listen, --stage-timeout, or the same from the variables LeaderWorkerSet injects
// (LWS_GROUP_SIZE, LWS_WORKER_INDEX, LWS_LEADER_ADDRESS) when --stages is not given.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace placer::server {

struct StageOptions {
  int stages = 1;  // 1: a single process (no group)
  int rank = 0;    // 0: the leader (serves the APIs); others run decoder layers only
  std::string rendezvous;  // HOST:PORT of the leader's store
  std::string listen;      // address this rank's Gloo device binds (never the hostname's)
  std::chrono::milliseconds timeout{5000};               // every send and receive
  std::chrono::milliseconds rendezvous_timeout{120000};  // all ranks up and loaded
  bool enabled() const { return stages > 1; }
};

// The raw flag text, resolved by ResolveStageOptions.
struct StageFlags {
  int stages = 0;  // 0: not given (LeaderWorkerSet's variables may set it)
  int rank = -1;
  std::string rendezvous;
  std::string listen;
  std::string timeout = "5s";
  std::string rendezvous_timeout = "120s";
};

void AddStageFlags(CLI::App& app, StageFlags& flags);

// Default rendezvous port with LWS_LEADER_ADDRESS (torch.distributed's).
constexpr int kDefaultRendezvousPort = 29500;

// Flags first, then LeaderWorkerSet's variables (read through `env`: null when unset).
// Errors name the flag or variable.
absl::StatusOr<StageOptions> ResolveStageOptions(
    const StageFlags& flags, const std::function<const char*(const char*)>& env);

}  // namespace placer::server
