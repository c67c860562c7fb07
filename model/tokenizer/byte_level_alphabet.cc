#include "model/tokenizer/byte_level_alphabet.h"

#include <array>
#include <unordered_map>

#include "model/tokenizer/unicode_text.h"

namespace placer::tokenizer {
namespace {

struct Alphabet {
  std::array<std::string, 256> spelling;              // byte -> UTF-8 of its code point
  std::unordered_map<std::int32_t, std::uint8_t> byte_of;  // code point -> byte
};

// Printable Latin-1 bytes stand for themselves; the rest move up to 256, 257, ... in order.
const Alphabet& GetAlphabet() {
  static const Alphabet* alphabet = [] {
    auto* built = new Alphabet;
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const std::int32_t code_point = printable ? b : 256 + next++;
      built->spelling[static_cast<std::size_t>(b)] = EncodeCodePoint(code_point);
      built->byte_of[code_point] = static_cast<std::uint8_t>(b);
    }
    return built;
  }();
  return *alphabet;
}

}  // namespace

std::string ToByteLevelAlphabet(absl::string_view bytes) {
  const Alphabet& alphabet = GetAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += alphabet.spelling[static_cast<std::uint8_t>(c)];
  return out;
}

std::optional<std::string> FromByteLevelAlphabet(absl::string_view token) {
  const Alphabet& alphabet = GetAlphabet();
  std::string out;
  out.reserve(token.size());
  std::size_t offset = 0;
  while (offset < token.size()) {
    // Alphabet characters are one or two bytes long (U+0021..U+0143).
    const auto lead = static_cast<std::uint8_t>(token[offset]);
    std::int32_t code_point = -1;
    if (lead < 0x80) {
      code_point = lead;
      offset += 1;
    } else if ((lead & 0xE0) == 0xC0 && offset + 1 < token.size() &&
               (static_cast<std::uint8_t>(token[offset + 1]) & 0xC0) == 0x80) {
      code_point = ((lead & 0x1F) << 6) | (static_cast<std::uint8_t>(token[offset + 1]) & 0x3F);
      offset += 2;
    } else {
      return std::nullopt;
    }
    const auto found = alphabet.byte_of.find(code_point);
    if (found == alphabet.byte_of.end()) return std::nullopt;
    out.push_back(static_cast<char>(found->second));
  }
  return out;
}

}  // namespace placer::tokenizer
