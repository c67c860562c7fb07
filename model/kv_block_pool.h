// The keys and values of every running sequence, paged: one pool per decoder layer on that
// layer's execution device, allocated once from the plan's KV reserve and cut into blocks of
// kKvBlockPositions positions. A sequence holds a list of block ids (its block table), the
// same ids in every layer, so sequences of very different lengths share the reserve without
// fragmenting it and a finished one gives its blocks back at once. Running out of blocks is
// a status the scheduler waits on, never a crash.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/reserves.h"
#include "runtime/runtime_accounting.h"

namespace placer::model {

class KvBlockPool {
 public:
  struct LayerPlacement {
    at::Device device;
    std::string device_name;  // placer's name ("cuda:1") for accounting
    // False for a layer another pipeline stage runs: no keys or values here.
    bool held = true;
  };
  static constexpr int64_t kBlockPositions = placement::kKvBlockPositions;

  // Allocates (virtual memory on the CPU: pages are touched only as blocks fill) and charges
  // each device its layers' pools. RESOURCE_EXHAUSTED when a device cannot hold them.
  static absl::StatusOr<std::shared_ptr<KvBlockPool>> Create(
      std::vector<LayerPlacement> layers, int64_t kv_heads, int64_t head_dim, int64_t blocks,
      at::ScalarType dtype, std::shared_ptr<runtime::RuntimeAccounting> accounting);
  ~KvBlockPool();
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  // Blocks for `positions` positions, consecutive ones when a run is free (the sequence's
  // keys are then one slice and need no gather). RESOURCE_EXHAUSTED when too few are free.
  absl::StatusOr<std::vector<int32_t>> Take(int64_t positions);
  void Give(const std::vector<int32_t>& blocks);

  int64_t block_count() const { return block_count_; }
  int64_t blocks_free() const;
  // Blocks taken (block_count() - blocks_free()), or what MirrorBlocksInUse last set.
  int64_t blocks_in_use() const;
  // A pipeline worker's pool takes no blocks: the leader takes and gives them and sends its
  // block tables with each step. It reports the leader's figure (clamped to the pool) as its
  // own blocks in use from now on, for the metrics.
  void MirrorBlocksInUse(int64_t used);

  // [kv_heads, block_count * kBlockPositions, head_dim]: block b holds positions
  // b*kBlockPositions .. +kBlockPositions-1 of dimension 1.
  at::Tensor& keys(int64_t layer) { return keys_[static_cast<size_t>(layer)]; }
  at::Tensor& values(int64_t layer) { return values_[static_cast<size_t>(layer)]; }
  at::Device device(int64_t layer) const { return layers_[static_cast<size_t>(layer)].device; }

 private:
  KvBlockPool(std::vector<LayerPlacement> layers, int64_t blocks,
              std::shared_ptr<runtime::RuntimeAccounting> accounting);
  void PublishCounts() const;  // mutex_ held
  int64_t InUse() const;       // mutex_ held

  std::vector<LayerPlacement> layers_;
  std::vector<std::string> devices_;  // distinct device names, in layer order
  std::vector<at::Tensor> keys_, values_;
  const int64_t block_count_;
  std::shared_ptr<runtime::RuntimeAccounting> accounting_;
  std::vector<std::pair<std::string, int64_t>> charged_;  // bytes per device

  mutable std::mutex mutex_;
  std::set<int32_t> free_;
  int64_t mirrored_in_use_ = -1;  // mutex_; >= 0 once mirrored
};

}  // namespace placer::model
