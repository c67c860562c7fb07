// Seeded random tensor values for placer-make-checkpoint: weights ~ N(0, 0.02),
// norms 1, biases 0, as a freshly initialised transformers model.
#pragma once

#include <cstdint>

#include "loader/checkpoint_writer.h"

namespace placer::loader {

// Each tensor gets its own generator seeded from `seed` and its name, so a
// tensor's values do not depend on sharding or on which tensors come before.
TensorFillFactory MakeRandomFill(std::uint64_t seed);

}  // namespace placer::loader
