#include "model/tokenizer/unicode_text.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "absl/strings/str_cat.h"

namespace placer::tokenizer {
namespace {

// The next code point at `*offset` (advancing past it), or a negative value for an
// ill-formed subpart (advancing past the maximal subpart).
std::int32_t NextCodePoint(absl::string_view text, std::int32_t* offset) {
  UChar32 code_point = 0;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
  const auto length = static_cast<std::int32_t>(text.size());
  U8_NEXT(bytes, *offset, length, code_point);
  return code_point;
}

}  // namespace

std::string ToValidUtf8(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::int32_t offset = 0;
  while (static_cast<std::size_t>(offset) < bytes.size()) {
    const std::int32_t at = offset;
    if (NextCodePoint(bytes, &offset) < 0) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(bytes.data() + at, static_cast<std::size_t>(offset - at));
    }
  }
  return out;
}

std::size_t CompleteUtf8Prefix(absl::string_view bytes) {
  // A character is at most 4 bytes: only the last three can start an unfinished one.
  const std::size_t size = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto lead = static_cast<std::uint8_t>(bytes[size - back]);
    if (U8_IS_TRAIL(lead)) continue;
    if (lead < 0x80) return size;
    const std::size_t needed = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    if (needed <= back) return size;  // complete, or ill-formed: convert it now
    // Hold it only when some continuation would make it a character: try to finish it.
    for (const char filler : {'\x80', '\x90', '\xA0'}) {
      std::string trial(bytes.substr(size - back));
      trial.append(needed - back, filler);
      std::int32_t offset = 0;
      if (NextCodePoint(trial, &offset) >= 0 && static_cast<std::size_t>(offset) == needed) {
        return size - back;
      }
    }
    return size;
  }
  return size;
}

std::vector<std::string> SplitCodePoints(absl::string_view text) {
  std::vector<std::string> out;
  std::int32_t offset = 0;
  while (static_cast<std::size_t>(offset) < text.size()) {
    const std::int32_t at = offset;
    NextCodePoint(text, &offset);
    out.emplace_back(text.substr(static_cast<std::size_t>(at), static_cast<std::size_t>(offset - at)));
  }
  return out;
}

std::string EncodeCodePoint(std::int32_t code_point) {
  if (code_point < 0 || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) {
    code_point = 0xFFFD;
  }
  std::uint8_t buffer[4];
  std::int32_t length = 0;
  U8_APPEND_UNSAFE(buffer, length, code_point);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(length));
}

bool IsWhiteSpace(std::int32_t code_point) { return u_isUWhiteSpace(code_point); }

std::size_t LeadingWhiteSpaceEnd(absl::string_view text) {
  std::int32_t offset = 0;
  while (static_cast<std::size_t>(offset) < text.size()) {
    const std::int32_t at = offset;
    if (!IsWhiteSpace(NextCodePoint(text, &offset))) return static_cast<std::size_t>(at);
  }
  return text.size();
}

std::size_t TrailingWhiteSpaceStart(absl::string_view text) {
  std::size_t run_start = text.size();
  bool in_run = false;
  std::int32_t offset = 0;
  while (static_cast<std::size_t>(offset) < text.size()) {
    const std::int32_t at = offset;
    const bool white = IsWhiteSpace(NextCodePoint(text, &offset));
    if (white && !in_run) run_start = static_cast<std::size_t>(at);
    in_run = white;
  }
  return in_run ? run_start : text.size();
}

}  // namespace placer::tokenizer
