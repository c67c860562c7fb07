#include "loader/dtype_torch.h"

#include "absl/strings/str_cat.h"

namespace placer::loader {

absl::StatusOr<at::ScalarType> ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kF64: return at::kDouble;
    case DType::kF32: return at::kFloat;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
    case DType::kI64: return at::kLong;
    case DType::kI32: return at::kInt;
    case DType::kI16: return at::kShort;
    case DType::kI8: return at::kChar;
    case DType::kU8: return at::kByte;
    case DType::kBool: return at::kBool;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(
      "dtype ", DTypeName(dtype),
      " is recognised but not supported for compute (libtorch 1.13 has no "
      "8-bit float kernels); convert the checkpoint to BF16 or F16"));
}

absl::StatusOr<DType> FromScalarType(at::ScalarType type) {
  switch (type) {
    case at::kDouble: return DType::kF64;
    case at::kFloat: return DType::kF32;
    case at::kHalf: return DType::kF16;
    case at::kBFloat16: return DType::kBF16;
    case at::kLong: return DType::kI64;
    case at::kInt: return DType::kI32;
    case at::kShort: return DType::kI16;
    case at::kChar: return DType::kI8;
    case at::kByte: return DType::kU8;
    case at::kBool: return DType::kBool;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("scalar type ", c10::toString(type), " has no safetensors dtype"));
  }
}

}  // namespace placer::loader
