// Checks the model tests share (quantize_at_load_test.cc, the pre-quantized checkpoint tests,
// tests/gpu/model_on_gpu_test.cc): logits against a reference, and the bytes staged for an
// offloaded block.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>

#include "model/causal_lm.h"
#include "runtime/runtime_accounting.h"

namespace placer::model::model_checks {

// Every logit within 2e-5 of `expected`, relative to max(1, |expected|): the packed kernels
// against a reference that dequantizes exactly (float rounding only).
inline void ExpectLogitsClose(const Logits& actual, const Logits& expected, const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (size_t i = 0; i < actual.values.size(); ++i) {
    ASSERT_NEAR(actual.values[i], expected.values[i],
                2e-5f * std::max(1.0f, std::abs(expected.values[i])))
        << what << ": logit " << i;
  }
}

// The largest |got - want| of a row relative to that row's largest |want|, over all rows of
// two [rows, vocab] logits of the same shape (else a recorded failure and 1e9).
inline double WorstRowRelativeError(const Logits& got, const Logits& want) {
  EXPECT_EQ(got.shape, want.shape);
  if (got.shape != want.shape || want.shape.size() != 2) return 1e9;
  const int64_t vocab = want.shape[1];
  double worst = 0;
  for (int64_t row = 0; row < want.shape[0]; ++row) {
    double scale = 0, error = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double w = want.values[row * vocab + v], g = got.values[row * vocab + v];
      scale = std::max(scale, std::abs(w));
      error = std::max(error, std::abs(w - g));
    }
    worst = std::max(worst, error / std::max(scale, 1e-12));
  }
  return worst;
}

// Bytes copied cpu -> cuda:0 beyond the `token_bytes` of the prompt's ids, once they land on a
// whole number of `block_bytes`: the stager prefetches a block again for the next pass
// (cyclically), so a copy may be under way when the counter is read; waits up to 5 s.
inline uint64_t StagedBytesOnWholeBlocks(const runtime::RuntimeAccounting& accounting,
                                         uint64_t token_bytes, uint64_t block_bytes) {
  uint64_t moved = accounting.Transferred("cpu", "cuda:0") - token_bytes;
  for (int i = 0; i < 500 && moved % block_bytes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    moved = accounting.Transferred("cpu", "cuda:0") - token_bytes;
  }
  return moved;
}

}  // namespace placer::model::model_checks
