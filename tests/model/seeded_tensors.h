// The seeded float32 inputs the kernel tests draw: the same seed gives the same tensor, so a
// failure names values anyone can regenerate.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace placer::model {

inline at::Tensor SeededRandn(std::vector<int64_t> shape, int seed) {
  at::manual_seed(seed);
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat));
}

}  // namespace placer::model
