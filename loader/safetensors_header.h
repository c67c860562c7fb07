// The header of a .safetensors file: 8-byte little-endian length, then a JSON
// object mapping tensor names to {dtype, shape, data_offsets}, plus an
// optional "__metadata__" object of strings. Parsing is strict: every tensor
// must lie inside the data section, tensors may not overlap, and each byte
// range must equal shape x dtype size exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "loader/dtype.h"

namespace placer::loader {

// A header longer than this is refused rather than allocated: real
// checkpoints have headers of a few MiB at most.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t num_elements = 0;
  // Absolute byte offsets in the file: [begin, end).
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  std::uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::uint64_t header_json_bytes = 0;
  // Absolute offset of the data section (8 + header_json_bytes).
  std::uint64_t data_start = 0;
  std::uint64_t file_size = 0;
  // Fnv1a64 of the JSON header text: a fingerprint for the offload store.
  std::uint64_t header_fnv1a64 = 0;
  std::map<std::string, std::string> metadata;
  // Sorted by name.
  std::map<std::string, SafetensorsEntry> tensors;
};

// Decodes the 8-byte length prefix and checks it against the file size and
// kMaxSafetensorsHeaderBytes. `file` names the file in errors.
absl::StatusOr<std::uint64_t> ParseSafetensorsHeaderLength(
    absl::string_view prefix, std::uint64_t file_size, absl::string_view file);

// Parses the JSON header text of a file of `file_size` bytes.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeaderJson(
    absl::string_view json_text, std::uint64_t file_size, absl::string_view file);

// Parses a whole file held in memory (used by the fuzzer and tests).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsBuffer(absl::string_view bytes,
                                                         absl::string_view file);

// Reads only the length prefix and the header of `path`; no tensor data.
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

}  // namespace placer::loader
