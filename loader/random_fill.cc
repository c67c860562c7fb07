#include "loader/random_fill.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/file_util.h"

namespace placer::loader {

TensorFillFactory MakeRandomFill(std::uint64_t seed) {
  return [seed](const ExpectedTensor& tensor, DType dtype) -> SafetensorsWriter::FillFn {
    return [seed, tensor, dtype](std::uint8_t* destination, std::size_t nbytes) -> absl::Status {
      absl::StatusOr<at::ScalarType> type = ToScalarType(dtype);
      if (!type.ok()) return type.status();
      try {
        at::Tensor values;
        switch (tensor.init) {
          case ExpectedTensor::Init::kOnes:
            values = at::ones(tensor.shape, at::TensorOptions().dtype(*type));
            break;
          case ExpectedTensor::Init::kZeros:
            values = at::zeros(tensor.shape, at::TensorOptions().dtype(*type));
            break;
          case ExpectedTensor::Init::kNormal: {
            at::Generator generator =
                at::detail::createCPUGenerator(seed ^ Fnv1a64(tensor.name));
            values = (at::randn(tensor.shape, generator, at::TensorOptions().dtype(at::kFloat)) *
                      0.02)
                         .to(*type);
            break;
          }
        }
        values = values.contiguous();
        if (static_cast<std::size_t>(values.nbytes()) != nbytes) {
          return absl::InternalError(absl::StrCat(tensor.name, ": size mismatch"));
        }
        if (nbytes != 0) std::memcpy(destination, values.data_ptr(), nbytes);
        return absl::OkStatus();
      } catch (const c10::Error& e) {
        return absl::InternalError(absl::StrCat(tensor.name, ": ", e.what_without_backtrace()));
      }
    };
  };
}

}  // namespace placer::loader
