// StreamAhead and StreamAheadRows (model/stream_prefetch.h): the prefetch target of a weight
// row is kStreamPrefetchBytes further on only while the whole row there lies inside the
// weight, so a kernel's prefetch pointer never leaves the tensor it reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/stream_prefetch.h"

namespace placer::model {
namespace {

template <typename Element>
void ExpectEveryRowPrefetchesInsideTheWeight(int64_t rows, int64_t in) {
  std::vector<Element> weight(static_cast<size_t>(rows * in));
  const Element* end = weight.data() + weight.size();
  const int64_t ahead = kStreamPrefetchBytes / static_cast<int64_t>(sizeof(Element));
  for (int64_t n = 0; n < rows; ++n) {
    const Element* row = weight.data() + n * in;
    const Element* target = StreamAhead(row, in, end);
    if (n * in + ahead + in <= rows * in) {
      EXPECT_EQ(target, row + ahead) << "row " << n << " of " << rows << " x " << in;
    } else {
      EXPECT_EQ(target, row) << "row " << n << " of " << rows << " x " << in;
    }
    EXPECT_LE(target + in, end) << "row " << n << " of " << rows << " x " << in;
  }
}

TEST(StreamPrefetch, RowsAheadStayInsideTheWeightForFloatAndBf16) {
  // Rows shorter, equal to and longer than the distance, and weights shorter than it.
  for (const int64_t in : {1, 7, 768, 2048, 2049, 5632}) {
    for (const int64_t rows : {1, 2, 3, 17, 64}) {
      ExpectEveryRowPrefetchesInsideTheWeight<float>(rows, in);
      ExpectEveryRowPrefetchesInsideTheWeight<uint16_t>(rows, in);
    }
  }
}

TEST(StreamPrefetch, PackedRowsAheadCoverTheDistance) {
  EXPECT_EQ(StreamAheadRows(kStreamPrefetchBytes), 1);
  EXPECT_EQ(StreamAheadRows(kStreamPrefetchBytes + 1), 1);
  EXPECT_EQ(StreamAheadRows(kStreamPrefetchBytes - 1), 2);
  EXPECT_EQ(StreamAheadRows(400), (kStreamPrefetchBytes + 399) / 400);
  for (const int64_t row_bytes : {1, 64, 400, 1000, 4096, 9000}) {
    const int64_t rows = StreamAheadRows(row_bytes);
    EXPECT_GE(rows * row_bytes, kStreamPrefetchBytes) << row_bytes;
    EXPECT_LT((rows - 1) * row_bytes, kStreamPrefetchBytes) << row_bytes;
  }
  EXPECT_EQ(StreamAheadRows(0), 1);
}

}  // namespace
}  // namespace placer::model
