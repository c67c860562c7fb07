// Byte sizes as people write them on command lines ("20GiB", "1.5 GB",
// "4096"), parsed the way Hugging Face Accelerate reads max_memory values:
// KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::placement {

// Accepts a non-negative number (integer or decimal) followed by an optional
// unit among B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (exact spelling; a space
// between number and unit is allowed). A bare number means bytes. Errors say
// what was wrong with `text`.
absl::StatusOr<std::uint64_t> ParseByteSize(absl::string_view text);

// "402 MiB", "1.50 GiB", "512 B": binary units, for tables and messages.
std::string FormatBytes(std::uint64_t bytes);

}  // namespace placer::placement
