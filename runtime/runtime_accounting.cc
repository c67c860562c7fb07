#include "runtime/runtime_accounting.h"

namespace placer::runtime {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kWeights:
      return "weights";
    case MemoryKind::kKvCache:
      return "kv_cache";
    case MemoryKind::kStaging:
      return "staging";
  }
  return "";
}

RuntimeAccounting::RuntimeAccounting(std::vector<std::string> devices) {
  for (std::string& device : devices) Find(device);
}

DeviceUsage& RuntimeAccounting::Find(const std::string& device) {
  for (DeviceUsage& usage : devices_) {
    if (usage.device == device) return usage;
  }
  devices_.push_back(DeviceUsage{device});
  return devices_.back();
}

void RuntimeAccounting::AddMemory(const std::string& device, MemoryKind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& used = Find(device).used_bytes[static_cast<int>(kind)];
  // A release never takes a figure below zero, even if a caller double-counts.
  if (bytes < 0 && static_cast<uint64_t>(-bytes) > used) {
    used = 0;
  } else {
    used += static_cast<uint64_t>(bytes);
  }
}

void RuntimeAccounting::SetKvBlocks(const std::string& device, uint64_t used, uint64_t free) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceUsage& usage = Find(device);
  usage.kv_blocks_used = used;
  usage.kv_blocks_free = free;
}

void RuntimeAccounting::AddTransfer(const std::string& from, const std::string& to,
                                    uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  transfers_[{from, to}] += bytes;
}

void RuntimeAccounting::AddOffloadWait(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  offload_wait_seconds_ += seconds;
}

void RuntimeAccounting::AddBlockCompute(const std::string& block, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = block_index_.emplace(block, block_compute_.size());
  if (inserted) block_compute_.push_back({block, 0, 0});
  BlockCompute& entry = block_compute_[it->second];
  entry.seconds += seconds;
  ++entry.passes;
}

RuntimeFigures RuntimeAccounting::Figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RuntimeFigures figures;
  figures.devices = devices_;
  for (const auto& [pair, bytes] : transfers_) {
    figures.transfers.push_back({pair.first, pair.second, bytes});
  }
  figures.offload_wait_seconds = offload_wait_seconds_;
  figures.block_compute = block_compute_;
  return figures;
}

uint64_t RuntimeAccounting::Used(const std::string& device, MemoryKind kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const DeviceUsage& usage : devices_) {
    if (usage.device == device) return usage.used(kind);
  }
  return 0;
}

std::pair<uint64_t, uint64_t> RuntimeAccounting::KvBlocks(const std::string& device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const DeviceUsage& usage : devices_) {
    if (usage.device == device) return {usage.kv_blocks_used, usage.kv_blocks_free};
  }
  return {0, 0};
}

uint64_t RuntimeAccounting::Transferred(const std::string& from, const std::string& to) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = transfers_.find({from, to});
  return it == transfers_.end() ? 0 : it->second;
}

}  // namespace placer::runtime
