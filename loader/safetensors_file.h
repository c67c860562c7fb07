// One .safetensors file: its header is read at Open(); the file is mmapped
// on the first tensor read, and tensors are handed out as views over the
// mapping or converted with one copy out of it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/mapped_file.h"
#include "loader/safetensors_header.h"

namespace placer::loader {

class SafetensorsFile {
 public:
  // Reads the header only; no tensor data.
  static absl::StatusOr<std::shared_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  std::int64_t mtime_ns() const { return mtime_ns_; }
  bool mapped() const;

  // The tensor as stored, on the CPU: a zero-copy view over the mapping.
  absl::StatusOr<at::Tensor> Read(absl::string_view name) const;

  // When `dtype` is the stored dtype and `device` is the CPU, a zero-copy
  // view over the mapping, which stays mapped while any view lives. The view
  // is read-only memory: writing into it faults (clone() first to modify).
  // Otherwise a fresh tensor on `device`, made with exactly one copy out
  // of the mapping (two if the file's data is misaligned for the dtype).
  absl::StatusOr<at::Tensor> Read(absl::string_view name, at::ScalarType dtype,
                                  at::Device device) const;

 private:
  SafetensorsFile(std::string path, SafetensorsHeader header, std::int64_t mtime_ns)
      : path_(std::move(path)), header_(std::move(header)), mtime_ns_(mtime_ns) {}
  absl::StatusOr<std::shared_ptr<const MappedFile>> Map() const;

  std::string path_;
  SafetensorsHeader header_;
  std::int64_t mtime_ns_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const MappedFile> mapping_;
};

}  // namespace placer::loader
