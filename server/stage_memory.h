// A worker's live device memory as it travels to the leader (through the rendezvous store,
// key rank/R/memory, republished every second): what its runtime accounting holds on each
// device by kind, as placer_device_memory_used_bytes has it on the worker itself. The leader
// reads every worker's at scrape time (label node). Torch-free; the decoder takes bytes from
// another process and is fuzzed (tests/fuzz/stage_memory_fuzz.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/runtime_accounting.h"

namespace placer::server {

struct StageMemoryUse {
  std::string device;  // "cuda:0", "cpu", "disk" (without the node)
  std::string kind;    // "weights", "kv_cache", "staging"
  uint64_t bytes = 0;
};

std::string EncodeStageMemory(const runtime::RuntimeFigures& figures);

// Errors name the entry and field; at most 64 devices and names of 64 characters.
absl::StatusOr<std::vector<StageMemoryUse>> DecodeStageMemory(const std::string& text);

// The store key of a rank's figures.
std::string StageMemoryKey(int rank);

}  // namespace placer::server
