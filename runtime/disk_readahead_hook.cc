#include "runtime/disk_readahead_hook.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace placer::runtime {

bool RunsFromDisk(const BoundBlock& block) {
  return block.weights_device.kind == DeviceKind::kDisk && !block.staged;
}

void DiskReadaheadHook::Enter(BlockCall& call) {
  if (!RunsFromDisk(*call.bound)) return;
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (size_t step = 1; step <= blocks_.size(); ++step) {
    const BoundBlock& next = blocks_[(call.block + step) % blocks_.size()];
    if (!RunsFromDisk(next)) continue;
    for (const at::Tensor& tensor : next.weights) {
      if (!tensor.defined() || tensor.numel() == 0) continue;
      const auto start = reinterpret_cast<uintptr_t>(tensor.data_ptr());
      const uintptr_t aligned = start & ~(kPage - 1);
      const uintptr_t bytes = static_cast<uintptr_t>(tensor.numel()) * tensor.element_size();
      // Advice only: the kernel reads the pages in while the current block computes.
      madvise(reinterpret_cast<void*>(aligned), start + bytes - aligned, MADV_WILLNEED);
    }
    return;
  }
}

}  // namespace placer::runtime
