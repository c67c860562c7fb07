#include "base/malloc_reuse.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace placer::base {
namespace {

constexpr int kMmapThresholdBytes = 32 << 20;  // glibc's largest dynamic threshold, fixed
constexpr int kTrimThresholdBytes = 1 << 30;

bool UserSetMallocThresholds() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) {
    return true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && (std::strstr(tunables, "glibc.malloc.mmap_threshold") != nullptr ||
                                 std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr);
}

}  // namespace

void KeepFreedMemoryForReuse() {
  if (UserSetMallocThresholds()) return;
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes);
}

}  // namespace placer::base
