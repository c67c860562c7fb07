// Seeded random tensor values for placer-make-checkpoint: weights ~ N(0, 0.02) as a freshly
// initialised transformers model, but norms ~ 1 + N(0, 0.1) and biases ~ N(0, 0.05) instead
// of exact ones and zeros: a norm or bias the forward pass forgot would otherwise change
// nothing and no test could see it.
#pragma once

#include <cstdint>

#include "loader/checkpoint_writer.h"

namespace placer::loader {

// Each tensor gets its own generator seeded from `seed` and its name, so a
// tensor's values do not depend on sharding or on which tensors come before.
TensorFillFactory MakeRandomFill(std::uint64_t seed);

}  // namespace placer::loader
