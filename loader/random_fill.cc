#include "loader/random_fill.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/file_util.h"
#include "base/status_macros.h"

namespace placer::loader {

TensorFillFactory MakeRandomFill(std::uint64_t seed) {
  return [seed](const ExpectedTensor& tensor, DType dtype) -> SafetensorsWriter::FillFn {
    return [seed, tensor, dtype](std::uint8_t* destination, std::size_t nbytes) -> absl::Status {
      PLACER_ASSIGN_OR_RETURN(at::ScalarType type, ToScalarType(dtype));
      try {
        at::Generator generator = at::detail::createCPUGenerator(seed ^ Fnv1a64(tensor.name));
        const at::Tensor noise =
            at::randn(tensor.shape, generator, at::TensorOptions().dtype(at::kFloat));
        at::Tensor values;
        switch (tensor.init) {
          case TensorInit::kOnes:
            values = (noise * 0.1 + 1.0).to(type);
            break;
          case TensorInit::kZeros:
            values = (noise * 0.05).to(type);
            break;
          case TensorInit::kNormal:
            values = (noise * 0.02).to(type);
            break;
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
