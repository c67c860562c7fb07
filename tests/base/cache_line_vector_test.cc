// CacheLineVector's promise: data() on a 64-byte line for every size and element type, after
// every growth, and after a swap with a fresh vector (how the kernels give back a long
// prompt's buffers). Between the checked vectors, small plain allocations shift where glibc's
// next block starts, so a vector that merely happened to land on a line would be caught.
#include "base/cache_line_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace placer::base {
namespace {

bool OnALine(const void* p) { return reinterpret_cast<uintptr_t>(p) % kCacheLineBytes == 0; }

template <typename T>
void ExpectOnLinesAtEverySize() {
  std::vector<std::unique_ptr<char[]>> shifters;
  for (size_t n : {1, 3, 16, 17, 63, 64, 1000, 4097, 100000, 1 << 20}) {
    shifters.emplace_back(new char[n % 48 + 1]);  // another malloc between the vectors
    CacheLineVector<T> v(n);
    EXPECT_TRUE(OnALine(v.data())) << "size " << n << " of " << sizeof(T) << "-byte elements";
    v.resize(3 * n + 5);  // reallocates
    EXPECT_TRUE(OnALine(v.data())) << "grown to " << v.size();
    v.push_back(T{});
    EXPECT_TRUE(OnALine(v.data())) << "pushed to " << v.size();
  }
}

TEST(CacheLineVector, DataStartsOnALineForEveryElementTypeAndSize) {
  ExpectOnLinesAtEverySize<int8_t>();
  ExpectOnLinesAtEverySize<uint16_t>();
  ExpectOnLinesAtEverySize<float>();
  ExpectOnLinesAtEverySize<uint32_t>();
  ExpectOnLinesAtEverySize<double>();
}

TEST(CacheLineVector, KeepsItsValuesAndItsLineThroughGrowthAndSwap) {
  CacheLineVector<int32_t> v;
  for (int32_t i = 0; i < 5000; ++i) v.push_back(i * 7 - 3);
  for (int32_t i = 0; i < 5000; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i * 7 - 3);
  CacheLineVector<int32_t> fresh(9, 4);
  v.swap(fresh);
  EXPECT_TRUE(OnALine(v.data()));
  EXPECT_EQ(v.size(), 9u);
  EXPECT_EQ(v[8], 4);
  EXPECT_EQ(fresh.size(), 5000u);
  EXPECT_EQ(fresh[4999], 4999 * 7 - 3);
  CacheLineVector<int32_t>().swap(fresh);  // gives the storage back
  EXPECT_EQ(fresh.capacity(), 0u);
}

TEST(CacheLineVector, PlainVectorsAreNotPromisedALine) {
  // Why the type exists: at least one of these plain blocks is off a line (glibc aligns to 16).
  std::vector<std::unique_ptr<std::vector<float>>> plain;
  bool some_off_a_line = false;
  for (int i = 0; i < 16 && !some_off_a_line; ++i) {
    plain.push_back(std::make_unique<std::vector<float>>(static_cast<size_t>(100 + 3 * i)));
    some_off_a_line = !OnALine(plain.back()->data());
  }
  EXPECT_TRUE(some_off_a_line);
}

}  // namespace
}  // namespace placer::base
