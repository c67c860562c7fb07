// Maps safetensors dtypes to libtorch scalar types and back.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "loader/dtype.h"

namespace placer::loader {

// F8 types have no libtorch 1.13 equivalent: an error saying so.
absl::StatusOr<at::ScalarType> ToScalarType(DType dtype);

absl::StatusOr<DType> FromScalarType(at::ScalarType type);

}  // namespace placer::loader
