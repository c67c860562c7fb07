// Element types of the safetensors format, independent of libtorch so the
// parsers (and the fuzzers that exercise them) build without it.
#pragma once

#include <cstddef>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace placer::loader {

enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  kF8E4M3,
  kF8E5M2,
};

// Accepts the exact spellings of the safetensors format ("F32", "BF16", ...).
absl::StatusOr<DType> ParseDType(absl::string_view name);

// The safetensors spelling, e.g. "BF16".
absl::string_view DTypeName(DType dtype);

// Bytes per element.
std::size_t DTypeSize(DType dtype);

// F8 types are recognised by the parser (a checkpoint may list them) but
// libtorch 1.13 has no 8-bit float kernels, so they cannot be computed with.
bool IsComputeDType(DType dtype);

bool IsFloatingDType(DType dtype);

// The name transformers writes in config.json "torch_dtype" ("float32", ...).
absl::string_view TorchDTypeName(DType dtype);

// Inverse of TorchDTypeName; also accepts the safetensors spelling.
absl::StatusOr<DType> ParseTorchDTypeName(absl::string_view name);

}  // namespace placer::loader
