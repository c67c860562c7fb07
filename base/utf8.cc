#include "base/utf8.h"

#include <algorithm>
#include <cstdint>

#include <unicode/utf8.h>

#include "absl/strings/str_cat.h"

namespace placer {

std::optional<std::size_t> FirstInvalidUtf8(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
  std::size_t at = 0;
  while (at < text.size()) {
    // ICU's offsets are 32-bit: look at one character (at most 4 bytes) at a time, so any
    // length of text works.
    const auto length = static_cast<std::int32_t>(std::min<std::size_t>(text.size() - at, 4));
    std::int32_t offset = 0;
    UChar32 code_point = 0;
    U8_NEXT(bytes + at, offset, length, code_point);
    if (code_point < 0) return at;
    at += static_cast<std::size_t>(offset);
  }
  return std::nullopt;
}

absl::Status CheckUtf8(absl::string_view text, absl::string_view field) {
  if (const std::optional<std::size_t> at = FirstInvalidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": invalid UTF-8 at byte ", *at, " (text must be well-formed UTF-8)"));
  }
  return absl::OkStatus();
}

}  // namespace placer
