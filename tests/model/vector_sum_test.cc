// HorizontalSums512x16 (model/vector_sum.h) gives each of sixteen vectors the sum that
// _mm512_reduce_add_ps gives it, bit for bit, on inputs where the order of the additions
// changes the result.
// GCC 12's AVX-512 intrinsics warn about themselves (see model/small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "model/vector_sum.h"

namespace placer::model {
namespace {

struct Sums {
  float transposed[16];
  float one_by_one[16];
  float in_order[16];
};

__attribute__((target("avx512f"))) Sums SumSixteen(const float (&values)[16][16]) {
  __m512 v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_ps(values[i]);
  Sums sums;
  _mm512_storeu_ps(sums.transposed, HorizontalSums512x16(v));
  for (int i = 0; i < 16; ++i) {
    sums.one_by_one[i] = _mm512_reduce_add_ps(v[i]);
    float sum = 0;
    for (int lane = 0; lane < 16; ++lane) sum += values[i][lane];
    sums.in_order[i] = sum;
  }
  return sums;
}

TEST(HorizontalSums512x16, EachLaneIsTheIntrinsicsSumOfItsVector) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "this CPU lacks AVX-512F";
  std::mt19937 random(7);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  int differs_from_in_order = 0;
  for (int trial = 0; trial < 200; ++trial) {
    float values[16][16];
    for (auto& vector : values) {
      for (float& value : vector) value = std::ldexp(mantissa(random), exponent(random));
    }
    const Sums sums = SumSixteen(values);
    for (int i = 0; i < 16; ++i) {
      ASSERT_EQ(0, std::memcmp(&sums.transposed[i], &sums.one_by_one[i], sizeof(float)))
          << "trial " << trial << " vector " << i << ": " << sums.transposed[i] << " vs "
          << sums.one_by_one[i];
      differs_from_in_order += sums.in_order[i] != sums.one_by_one[i];
    }
  }
  // The inputs are ones where another order of additions gives other bits.
  EXPECT_GT(differs_from_in_order, 100);
}

}  // namespace
}  // namespace placer::model

#pragma GCC diagnostic pop
