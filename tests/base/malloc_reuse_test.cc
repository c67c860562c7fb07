// KeepFreedMemoryForReuse against glibc's own accounting (mallinfo2): a 24 MiB block, past
// glibc's default 128 KiB mmap threshold, comes from the heap rather than its own mapping, and
// stays there once freed instead of going back to the kernel. Run as its own process by ctest,
// so no earlier test has raised glibc's sliding threshold: without the call both checks fail.
#include "base/malloc_reuse.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace placer::base {
namespace {

TEST(MallocReuse, APrefillSizedBlockComesFromTheHeapAndStaysThereWhenFreed) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("GLIBC_TUNABLES") != nullptr) {
    GTEST_SKIP() << "the environment sets glibc's thresholds, which win";
  }
  KeepFreedMemoryForReuse();
  constexpr size_t kBytes = size_t{24} << 20;
  const struct mallinfo2 before = mallinfo2();
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  const struct mallinfo2 holding = mallinfo2();
  EXPECT_EQ(holding.hblks, before.hblks) << "the block got its own mapping";
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.fordblks, kBytes) << "the freed block went back to the kernel";
}

}  // namespace
}  // namespace placer::base
