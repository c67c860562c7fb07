// The one UTF-8 check: requests off the wire (proto/wire), tokenizer input and tokenizer.json
// strings all ask it, so "well-formed" means the same everywhere (RFC 3629 / Unicode table
// 3-7: no overlongs, no surrogates, nothing above U+10FFFF), which is also what protobuf's
// parser enforces on `string` fields.
#pragma once

#include <cstddef>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace placer {

// The offset of the first byte of the first ill-formed sequence, or nullopt when `text` is
// well-formed UTF-8 (the empty string is).
std::optional<std::size_t> FirstInvalidUtf8(absl::string_view text);

// OK, or INVALID_ARGUMENT "<field>: invalid UTF-8 at byte N (text must be well-formed UTF-8)".
absl::Status CheckUtf8(absl::string_view text, absl::string_view field);

inline bool IsValidUtf8(absl::string_view text) { return !FirstInvalidUtf8(text).has_value(); }

}  // namespace placer
