// Small filesystem helpers whose errors name the file and the reason.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace placer::loader {

absl::StatusOr<std::uint64_t> FileSize(const std::string& path);

// Modification time in nanoseconds since the epoch.
absl::StatusOr<std::int64_t> FileMtimeNs(const std::string& path);

// Reads a whole small file (JSON side files); refuses files over max_bytes
// so a corrupt or hostile file cannot exhaust memory.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          std::uint64_t max_bytes = 256ull << 20);

// Writes `contents` to path atomically (temporary file + rename), so a crash
// never leaves a half-written file under the final name.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// FNV-1a, 64 bit: a cheap fingerprint of header bytes, not a security check.
std::uint64_t Fnv1a64(absl::string_view bytes);

}  // namespace placer::loader
