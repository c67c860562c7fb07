// AlignedCodeLines against the bytes it stands for: every 4-byte start within a cache line, runs
// of 1-5 vectors, each run ending right before a page that cannot be read (a load past the run's
// last code would fault the test).
#include "model/aligned_code_lines.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace placer::model {
namespace {

__attribute__((target("avx512f"))) std::vector<uint8_t> ReadVectors(const uint8_t* codes,
                                                                    int vectors) {
  std::vector<uint8_t> bytes(static_cast<size_t>(vectors) * 64);
  AlignedCodeLines lines(codes);
  for (int k = 0; k < vectors; ++k) {
    _mm512_storeu_si512(bytes.data() + 64 * k, lines.Next());
  }
  return bytes;
}

TEST(AlignedCodeLines, GivesTheBytesAtEveryStartAndNeverReadsPastTheRun) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU lacks AVX-512";
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Two readable pages, then one that faults when touched.
  void* mapping = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapping, MAP_FAILED);
  uint8_t* base = static_cast<uint8_t*>(mapping);
  ASSERT_EQ(mprotect(base + 2 * page, page, PROT_NONE), 0);
  for (size_t i = 0; i < 2 * page; ++i) base[i] = static_cast<uint8_t>(i * 37 + i / 251);
  uint8_t* guard = base + 2 * page;
  for (int vectors = 1; vectors <= 5; ++vectors) {
    for (int offset = 0; offset < 64; offset += 4) {
      SCOPED_TRACE(testing::Message() << vectors << " vectors, " << offset << " bytes past a line");
      // The run ends as near the guard page as its start allows: on it (a run starting on a
      // line) or 64 - offset bytes before it, in the last readable line. One line too many faults.
      const uint8_t* codes = guard - 64 * vectors - (offset == 0 ? 0 : 64 - offset);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(codes) % 64, static_cast<uintptr_t>(offset));
      const std::vector<uint8_t> read = ReadVectors(codes, vectors);
      EXPECT_EQ(std::memcmp(read.data(), codes, read.size()), 0);
    }
  }
  munmap(mapping, 3 * page);
}

}  // namespace
}  // namespace placer::model
