// The staging copy for virtual GPUs: streaming stores for the bulk, plain copies for the
// unaligned ends and small sizes, so every byte must arrive whatever the alignment.
#include "runtime/host_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace placer::runtime {
namespace {

TEST(CopyHostBytes, CopiesEveryByteAtAnyAlignmentAndSize) {
  constexpr size_t kLargest = (1 << 20) + 300;
  std::vector<uint8_t> source(kLargest + 64);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + 7);
  // Around the streaming threshold (64 KiB), a 128-byte step, and sizes with odd tails.
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{31}, size_t{65535}, size_t{65536},
                       size_t{65536 + 127}, size_t{65536 + 129}, size_t{1} << 20, kLargest}) {
    for (size_t source_offset : {0, 1, 17, 32}) {
      for (size_t destination_offset : {0, 3, 31, 32}) {
        std::vector<uint8_t> destination(kLargest + 128, 0xEE);
        CopyHostBytes(destination.data() + destination_offset, source.data() + source_offset,
                      bytes);
        for (size_t i = 0; i < destination_offset; ++i) {
          ASSERT_EQ(destination[i], 0xEE) << "wrote before the destination";
        }
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(destination[destination_offset + i], source[source_offset + i])
              << "byte " << i << " of " << bytes << ", offsets " << source_offset << "/"
              << destination_offset;
        }
        ASSERT_EQ(destination[destination_offset + bytes], 0xEE) << "wrote past the end";
      }
    }
  }
}

}  // namespace
}  // namespace placer::runtime
