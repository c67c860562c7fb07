// MappedFile::DropResidentPages: a touched range of a mapped file leaves the process's resident
// set (the Rss of its /proc/self/smaps mapping) and reads back unchanged afterwards; memory
// outside any mapping is left alone and reported as such.
#include "loader/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/loader/smaps_line.h"

namespace placer::loader {
namespace {

namespace fs = std::filesystem;

// The Rss (KiB) of the /proc/self/smaps mapping that contains `address`; -1 if none does.
int64_t RssKibAt(const void* address) {
  const std::string line = SmapsLineAt(address, "Rss:");
  return line.empty() ? -1 : std::stoll(line.substr(4));
}

TEST(MappedFile, DroppedPagesLeaveTheResidentSetAndReadBackUnchanged) {
  const fs::path path = fs::temp_directory_path() / absl::StrCat("placer-mapped-", getpid());
  constexpr size_t kBytes = size_t{8} << 20;
  std::vector<uint8_t> bytes(kBytes);
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(kBytes));
  }
  auto mapped = MappedFile::Open(path.string(), kBytes);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  const uint8_t* data = (*mapped)->data();
  uint64_t sum = 0;
  for (size_t i = 0; i < kBytes; i += 4096) sum += data[i];  // touch every page
  EXPECT_GT(sum, 0u);
  const int64_t touched = RssKibAt(data);
  EXPECT_GE(touched, int64_t{7} << 10) << "every page was touched";
  // A range that starts and ends inside pages: the pages holding it go (its neighbours' share
  // of the first and last page too, which is harmless for a read-only mapping).
  ASSERT_TRUE(MappedFile::DropResidentPages(data + 100, kBytes - 5000));
  EXPECT_LE(RssKibAt(data), 8) << "at most the last page stays";
  EXPECT_EQ(std::memcmp(data, bytes.data(), kBytes), 0) << "the pages read back from the file";
  // Not a mapping: nothing done, false.
  std::vector<uint8_t> heap(1 << 16, 7);
  EXPECT_FALSE(MappedFile::DropResidentPages(heap.data(), heap.size()));
  EXPECT_EQ(heap[123], 7);
  // A range running past the mapping's end is refused as a whole.
  EXPECT_FALSE(MappedFile::DropResidentPages(data + kBytes - 10, 20));
  mapped->reset();
  fs::remove(path);
}

}  // namespace
}  // namespace placer::loader
