// FloatRowsToColumnBlocks against the layout column_blocks.h states, element by element, on
// shapes with partial vectors, groups and blocks, and on more than one thread.
#include "model/column_blocks.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

// Where row r's unit u lies in the blocks, or -1 where the layout holds no place for it.
int64_t PlaceOf(bool avx512, int64_t in, int64_t r, int64_t u) {
  const int64_t block = r / kColumnBlockRows, row = r % kColumnBlockRows;
  const int64_t base = block * in * kColumnBlockRows;
  if (avx512) return base + u * kColumnBlockRows + row;
  return base + (row / 8) * in * 8 + u * 8 + row % 8;
}

TEST(FloatRowsToColumnBlocks, EveryRowAndUnitLandsWhereTheLayoutSaysAndPaddingIsZero) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "needs AVX2";
  at::set_num_threads(2);  // the caller and one helper split the groups
  // Each layout this CPU writes (the 64-row one needs AVX-512F), whichever its tiles read.
  for (bool avx512 : {false, true}) {
    if (avx512 && !__builtin_cpu_supports("avx512f")) continue;
    for (int64_t rows : {1, 3, 8, 9, 31, 32, 63, 64, 65, 130}) {
      for (int64_t in : {1, 5, 8, 13, 255, 256, 257, 520}) {
        std::vector<float> x(static_cast<size_t>(rows * in));
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 9973) + 0.25f;
        const int64_t blocks = (rows + kColumnBlockRows - 1) / kColumnBlockRows;
        base::CacheLineVector<float> out(static_cast<size_t>(blocks * in * kColumnBlockRows),
                                         std::numeric_limits<float>::quiet_NaN());
        FloatRowsToColumnBlocks(x.data(), rows, in, out.data(), FloatColumnBlocksFor(avx512));
        // Padding rows: up to the block's end with AVX-512, to the group of 8's end with AVX2.
        const int64_t padded = avx512 ? blocks * kColumnBlockRows : (rows + 7) / 8 * 8;
        for (int64_t r = 0; r < padded; ++r) {
          for (int64_t u = 0; u < in; ++u) {
            const float expected = r < rows ? x[static_cast<size_t>(r * in + u)] : 0.0f;
            ASSERT_EQ(out[static_cast<size_t>(PlaceOf(avx512, in, r, u))], expected)
                << (avx512 ? "rows of 64" : "groups of 8") << ", rows " << rows << ", in " << in
                << ": row " << r << ", unit " << u;
          }
        }
      }
    }
  }
}

TEST(FloatRowsToColumnBlocks, ALayoutThisCpuCannotWriteIsRefusedNotGuessed) {
  if (__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU writes both layouts";
  std::vector<float> x(64, 1.0f);
  base::CacheLineVector<float> out(64 * kColumnBlockRows);
  try {
    FloatRowsToColumnBlocks(x.data(), 1, 64, out.data(), FloatColumnBlocks::kRowsOf64);
    FAIL() << "the 64-row layout was written without AVX-512F";
  } catch (const c10::Error& error) {
    EXPECT_NE(std::string(error.what()).find("AVX-512F"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace placer::model
