#include "loader/dtype.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace placer::loader {
namespace {

struct DTypeRow {
  DType dtype;
  absl::string_view safetensors_name;
  absl::string_view torch_name;
  std::size_t size;
  bool floating;
};

constexpr std::array<DTypeRow, 12> kRows = {{
    {DType::kF64, "F64", "float64", 8, true},
    {DType::kF32, "F32", "float32", 4, true},
    {DType::kF16, "F16", "float16", 2, true},
    {DType::kBF16, "BF16", "bfloat16", 2, true},
    {DType::kI64, "I64", "int64", 8, false},
    {DType::kI32, "I32", "int32", 4, false},
    {DType::kI16, "I16", "int16", 2, false},
    {DType::kI8, "I8", "int8", 1, false},
    {DType::kU8, "U8", "uint8", 1, false},
    {DType::kBool, "BOOL", "bool", 1, false},
    {DType::kF8E4M3, "F8_E4M3", "float8_e4m3fn", 1, true},
    {DType::kF8E5M2, "F8_E5M2", "float8_e5m2", 1, true},
}};

const DTypeRow& Row(DType dtype) {
  for (const DTypeRow& row : kRows) {
    if (row.dtype == dtype) return row;
  }
  return kRows[0];  // unreachable: every enumerator has a row
}

}  // namespace

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeRow& row : kRows) {
    if (row.safetensors_name == name) return row.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype \"", name,
      "\" (expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL F8_E4M3 F8_E5M2)"));
}

absl::string_view DTypeName(DType dtype) { return Row(dtype).safetensors_name; }
std::size_t DTypeSize(DType dtype) { return Row(dtype).size; }
bool IsComputeDType(DType dtype) {
  return dtype != DType::kF8E4M3 && dtype != DType::kF8E5M2;
}
bool IsFloatingDType(DType dtype) { return Row(dtype).floating; }
absl::string_view TorchDTypeName(DType dtype) { return Row(dtype).torch_name; }

absl::StatusOr<DType> ParseTorchDTypeName(absl::string_view name) {
  for (const DTypeRow& row : kRows) {
    if (row.torch_name == name || row.safetensors_name == name) return row.dtype;
  }
  if (name == "float" || name == "fp32") return DType::kF32;
  if (name == "half" || name == "fp16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown torch dtype \"", name, "\""));
}

}  // namespace placer::loader
