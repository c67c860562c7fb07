// GPT-2's reversible map between bytes and printable code points: byte-level BPE vocabularies
// are written in this alphabet (a space is "Ġ", a newline "Ċ"), so every byte sequence,
// valid UTF-8 or not, has a spelling in the vocabulary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace placer::tokenizer {

// `bytes` spelled in the alphabet (UTF-8).
std::string ToByteLevelAlphabet(absl::string_view bytes);

// The bytes a token spelled in the alphabet stands for; nullopt when a character of `token`
// is not in the alphabet.
std::optional<std::string> FromByteLevelAlphabet(absl::string_view token);

}  // namespace placer::tokenizer
