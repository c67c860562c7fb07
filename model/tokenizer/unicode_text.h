// UTF-8 helpers shared by the tokenizer (the validity check itself is base/utf8.h): lossy
// conversion (one U+FFFD per maximal ill-formed subpart, as Rust's from_utf8_lossy and
// WHATWG decoders do), splitting into code points, and the Unicode White_Space property.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/utf8.h"

namespace placer::tokenizer {

// Ill-formed sequences become U+FFFD; well-formed text comes back unchanged.
std::string ToValidUtf8(absl::string_view bytes);

// How many leading bytes of `bytes` can be converted now: everything except a trailing,
// still-incomplete but so far well-formed multi-byte character, which more bytes may finish.
std::size_t CompleteUtf8Prefix(absl::string_view bytes);

// The code points of well-formed `text`, each as its UTF-8 bytes.
std::vector<std::string> SplitCodePoints(absl::string_view text);

// The UTF-8 encoding of one code point (U+FFFD for values outside Unicode).
std::string EncodeCodePoint(std::int32_t code_point);

bool IsWhiteSpace(std::int32_t code_point);

// Offset just past the leading run of White_Space in well-formed `text`.
std::size_t LeadingWhiteSpaceEnd(absl::string_view text);
// Offset where the trailing run of White_Space in well-formed `text` begins.
std::size_t TrailingWhiteSpaceStart(absl::string_view text);

}  // namespace placer::tokenizer
