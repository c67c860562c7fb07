#include "loader/safetensors_file.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loader/dtype_torch.h"
#include "loader/file_util.h"
#include "loader/huge_page_tensor.h"
#include "base/status_macros.h"

namespace placer::loader {

absl::StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  PLACER_ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(path));
  PLACER_ASSIGN_OR_RETURN(std::int64_t mtime, FileMtimeNs(path));
  return std::shared_ptr<SafetensorsFile>(
      new SafetensorsFile(path, std::move(header), mtime));
}

bool SafetensorsFile::mapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapping_ != nullptr;
}

absl::StatusOr<std::shared_ptr<const MappedFile>> SafetensorsFile::Map() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mapping_ == nullptr) {
    PLACER_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> opened,
                            MappedFile::Open(path_, header_.file_size));
    mapping_ = std::move(opened);
  }
  return mapping_;
}

absl::StatusOr<at::Tensor> SafetensorsFile::Read(absl::string_view name) const {
  const auto it = header_.tensors.find(std::string(name));
  if (it == header_.tensors.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor \"", name, "\""));
  }
  absl::StatusOr<at::ScalarType> stored = ToScalarType(it->second.dtype);
  if (!stored.ok()) {
    return absl::Status(stored.status().code(), absl::StrCat(path_, ": tensor \"", name,
                                                             "\": ", stored.status().message()));
  }
  return Read(name, *stored, at::kCPU);
}

absl::StatusOr<at::Tensor> SafetensorsFile::Read(absl::string_view name, at::ScalarType dtype,
                                                 at::Device device) const {
  const auto it = header_.tensors.find(std::string(name));
  if (it == header_.tensors.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor \"", name, "\""));
  }
  const SafetensorsEntry& entry = it->second;
  const auto fail = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat(path_, ": tensor \"", name, "\": ", why));
  };
  absl::StatusOr<at::ScalarType> stored = ToScalarType(entry.dtype);
  if (!stored.ok()) return fail(stored.status().code(), stored.status().message());
  PLACER_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, Map());
  if (entry.end > mapping->size()) {
    return fail(absl::StatusCode::kDataLoss, "byte range lies outside the mapped file");
  }
  // from_blob wants a mutable pointer; the pages stay read-only (see MappedFile).
  void* bytes = const_cast<std::uint8_t*>(mapping->data() + entry.begin);
  const bool aligned = reinterpret_cast<std::uintptr_t>(bytes) % DTypeSize(entry.dtype) == 0;
  try {
    if (*stored == dtype && device.is_cpu() && aligned) {
      std::shared_ptr<const MappedFile> keep_alive = mapping;
      return at::from_blob(
          bytes, entry.shape, [keep_alive](void*) {}, at::TensorOptions().dtype(dtype));
    }
    at::Tensor source;
    if (aligned) {
      source = at::from_blob(bytes, entry.shape, at::TensorOptions().dtype(*stored));
    } else {
      // Written without the reference 8-byte padding: realign first.
      source = HugePageZeros(entry.shape, *stored);
      if (entry.nbytes() != 0) std::memcpy(source.data_ptr(), bytes, entry.nbytes());
      if (*stored == dtype && device.is_cpu()) return source;
    }
    if (device.is_cpu()) {
      // A converted weight stays for the process's life and decode streams through it.
      at::Tensor converted = HugePageZeros(entry.shape, dtype);
      converted.copy_(source);
      return converted;
    }
    return source.to(at::TensorOptions().dtype(dtype).device(device), /*non_blocking=*/false,
                     /*copy=*/true);
  } catch (const c10::Error& e) {
    return fail(absl::StatusCode::kInternal, e.what_without_backtrace());
  }
}

}  // namespace placer::loader
