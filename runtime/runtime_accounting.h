// What placer itself holds on each device while serving, by kind, and the offload traffic
// between devices. The runtime (hooks, staging, KV cache) writes it; metrics read a
// consistent copy at scrape time. Torch-free so the server can read it without ATen.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace placer::runtime {

// No "activations" kind: the forward pass's intermediates are libtorch allocations that come
// and go inside a block, which placer does not see; the plan's activation reserve covers them.
enum class MemoryKind { kWeights = 0, kKvCache = 1, kStaging = 2 };
inline constexpr int kMemoryKinds = 3;

// "weights", "kv_cache", "staging": the `kind` label of
// placer_device_memory_used_bytes.
const char* MemoryKindName(MemoryKind kind);

struct DeviceUsage {
  std::string device;  // "cuda:0", "cpu", "disk"
  std::array<uint64_t, kMemoryKinds> used_bytes{};
  uint64_t kv_blocks_used = 0, kv_blocks_free = 0;
  uint64_t used(MemoryKind kind) const { return used_bytes[static_cast<int>(kind)]; }
};

struct TransferTotal {
  std::string from, to;
  uint64_t bytes = 0;
};

// Host time spent running one block (embedding, a decoder layer, norm, lm_head), summed over
// forward passes. On the CPU that is its compute; CUDA kernels run asynchronously, so on a GPU
// it is the time to issue them.
struct BlockCompute {
  std::string block;  // "model.layers.3"
  double seconds = 0;
  uint64_t passes = 0;
};

struct RuntimeFigures {
  std::vector<DeviceUsage> devices;      // in the order given at construction
  std::vector<TransferTotal> transfers;  // ordered by (from, to)
  double offload_wait_seconds = 0;       // compute waiting for staged weights
  std::vector<BlockCompute> block_compute;  // in the order blocks first ran
};

class RuntimeAccounting {
 public:
  // Every device of the plan, so that each appears in the figures even while it holds nothing.
  explicit RuntimeAccounting(std::vector<std::string> devices);

  // Negative bytes release. Unknown devices are added at the end.
  void AddMemory(const std::string& device, MemoryKind kind, int64_t bytes);
  void SetKvBlocks(const std::string& device, uint64_t used, uint64_t free);
  void AddTransfer(const std::string& from, const std::string& to, uint64_t bytes);
  void AddOffloadWait(double seconds);
  void AddBlockCompute(const std::string& block, double seconds);

  RuntimeFigures Figures() const;
  uint64_t Used(const std::string& device, MemoryKind kind) const;
  // {used, free} KV-cache blocks of the device; {0, 0} when it holds none.
  std::pair<uint64_t, uint64_t> KvBlocks(const std::string& device) const;
  uint64_t Transferred(const std::string& from, const std::string& to) const;

 private:
  DeviceUsage& Find(const std::string& device);  // mutex_ held

  mutable std::mutex mutex_;
  std::vector<DeviceUsage> devices_;
  std::map<std::pair<std::string, std::string>, uint64_t> transfers_;
  double offload_wait_seconds_ = 0;
  std::vector<BlockCompute> block_compute_;
  std::map<std::string, size_t> block_index_;
};

}  // namespace placer::runtime
