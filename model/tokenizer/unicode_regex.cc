#include "model/tokenizer/unicode_regex.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "absl/strings/str_cat.h"

namespace placer::tokenizer {
namespace {

// ICU counts match steps in units of roughly a million; this bounds one search on a
// pathological pattern to seconds rather than forever.
constexpr std::int32_t kMatchTimeLimit = 2000;

}  // namespace

std::string OnigurumaToIcu(absl::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out.push_back(pattern[i]);
      continue;
    }
    const char escaped = pattern[++i];
    if (escaped == 's') {
      out += "\\p{White_Space}";
    } else if (escaped == 'S') {
      out += "\\P{White_Space}";
    } else {
      out.push_back('\\');
      out.push_back(escaped);
    }
  }
  return out;
}

UnicodeRegex::~UnicodeRegex() = default;

absl::StatusOr<std::shared_ptr<const UnicodeRegex>> UnicodeRegex::Compile(
    absl::string_view pattern, absl::string_view field) {
  const std::string icu_pattern = OnigurumaToIcu(pattern);
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  std::unique_ptr<icu::RegexPattern> compiled(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(icu::StringPiece(icu_pattern.data(),
                                                    static_cast<std::int32_t>(icu_pattern.size()))),
      0, where, status));
  if (U_FAILURE(status) || compiled == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: ", field, ": cannot compile regex (", u_errorName(status),
        " at offset ", where.offset, ")"));
  }
  std::shared_ptr<UnicodeRegex> regex(new UnicodeRegex);
  regex->pattern_ = std::move(compiled);
  regex->field_ = std::string(field);
  return std::shared_ptr<const UnicodeRegex>(std::move(regex));
}

absl::StatusOr<std::vector<std::pair<std::size_t, std::size_t>>> UnicodeRegex::FindAll(
    absl::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  if (text.empty()) return matches;
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
  // UTF-16 index -> UTF-8 byte offset, for every index a match can start or end at.
  std::vector<std::size_t> byte_offset(static_cast<std::size_t>(input.length()) + 1, text.size());
  {
    std::int32_t u8 = 0;
    std::int32_t u16 = 0;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
    const auto length = static_cast<std::int32_t>(text.size());
    while (u8 < length && u16 < input.length()) {
      byte_offset[static_cast<std::size_t>(u16)] = static_cast<std::size_t>(u8);
      UChar32 code_point = 0;
      U8_NEXT(bytes, u8, length, code_point);
      u16 += (code_point > 0xFFFF) ? 2 : 1;
    }
  }
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(pattern_->matcher(input, status));
  if (U_FAILURE(status)) {
    return absl::InternalError(absl::StrCat(field_, ": ICU matcher: ", u_errorName(status)));
  }
  matcher->setTimeLimit(kMatchTimeLimit, status);
  while (matcher->find(status) && U_SUCCESS(status)) {
    const std::int32_t begin = matcher->start(status);
    const std::int32_t end = matcher->end(status);
    if (U_FAILURE(status)) break;
    if (end > begin) {
      matches.emplace_back(byte_offset[static_cast<std::size_t>(begin)],
                           byte_offset[static_cast<std::size_t>(end)]);
    }
  }
  if (U_FAILURE(status)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tokenizer.json: ", field_, ": the regex gave up on this text (", u_errorName(status),
        "); the pattern backtracks too much"));
  }
  return matches;
}

}  // namespace placer::tokenizer
