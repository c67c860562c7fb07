// A whole file mapped read-only (PROT_READ, MAP_PRIVATE) into memory. Pages
// are read by the kernel on first touch, so mapping a 10 GiB shard costs
// nothing until tensors are used, and costs no commit charge at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace placer::loader {

class MappedFile {
 public:
  // Fails (naming the file) when it cannot be opened or mapped, or when its
  // size is not `expected_size` (the file changed since its header was read).
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(
      const std::string& path, std::uint64_t expected_size);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // When [begin, begin + bytes) lies inside a live mapping, drops the pages holding it from this
  // process's resident set (MADV_DONTNEED) and returns true; false (doing nothing) for any other
  // memory. Safe for any such range, neighbours included: the mapping is read-only and private,
  // so a dropped page is read back unchanged from the page cache (or the file) on its next
  // touch. For weights re-laid out into memory of their own (model/bf16_tiles.h), whose mapped
  // bytes would otherwise stay resident beside the copy.
  static bool DropResidentPages(const void* begin, std::uint64_t bytes);

 private:
  MappedFile(std::string path, std::uint8_t* data, std::uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  std::uint8_t* data_;
  std::uint64_t size_;
};

}  // namespace placer::loader
