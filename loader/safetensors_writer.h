// Writes .safetensors files the way the reference implementation does:
// header padded with spaces to an 8-byte boundary, tensors in the order they
// were added, back to back. Tensor bytes are produced one tensor at a time by
// a callback, so a multi-GiB file never has to sit in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "loader/dtype.h"

namespace placer::loader {

class SafetensorsWriter {
 public:
  // Fills exactly `nbytes` bytes at `destination` (little-endian elements).
  using FillFn = std::function<absl::Status(std::uint8_t* destination, std::size_t nbytes)>;

  explicit SafetensorsWriter(std::map<std::string, std::string> metadata = {});

  // Refuses duplicate or empty names and shapes whose size overflows.
  absl::Status Add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                   FillFn fill);

  // Convenience: bytes are copied when the file is written, so `bytes` must
  // stay alive until Write() returns.
  absl::Status AddBytes(std::string name, DType dtype, std::vector<std::int64_t> shape,
                        absl::string_view bytes);

  std::uint64_t data_bytes() const { return data_bytes_; }
  std::size_t tensor_count() const { return tensors_.size(); }

  // Writes to `path` + ".tmp" then renames, so readers never see half a file.
  absl::Status Write(const std::string& path) const;

  // The header JSON (padded) that Write() will emit.
  std::string HeaderJson() const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t nbytes;
    std::uint64_t offset;
    FillFn fill;
  };

  std::map<std::string, std::string> metadata_;
  std::vector<Pending> tensors_;
  std::map<std::string, std::size_t> index_by_name_;
  std::uint64_t data_bytes_ = 0;
};

}  // namespace placer::loader
