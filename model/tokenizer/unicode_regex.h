// Regular expressions as tokenizer.json writes them (Oniguruma syntax, which Hugging Face
// tokenizers runs), executed by ICU. ICU has the lookahead that GPT-2's split pattern needs
// (`\s+(?!\S)`) and full Unicode properties. One difference is bridged: Oniguruma's `\s` is
// the Unicode White_Space property while ICU's leaves out U+000B and U+0085, so `\s` and `\S`
// are rewritten to \p{White_Space} and \P{White_Space}.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <unicode/uversion.h>

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace placer::tokenizer {

class UnicodeRegex {
 public:
  // Errors name `field` and say what ICU found wrong.
  static absl::StatusOr<std::shared_ptr<const UnicodeRegex>> Compile(absl::string_view pattern,
                                                                     absl::string_view field);
  ~UnicodeRegex();

  // [begin, end) byte ranges of the non-empty, non-overlapping matches in well-formed UTF-8
  // `text`, left to right. Fails only when a pathological pattern exceeds the match time
  // limit (it never hangs).
  absl::StatusOr<std::vector<std::pair<std::size_t, std::size_t>>> FindAll(
      absl::string_view text) const;

 private:
  UnicodeRegex() = default;
  std::unique_ptr<icu::RegexPattern> pattern_;
  std::string field_;
};

// Oniguruma's escapes that mean something else in ICU, rewritten (exposed for tests).
std::string OnigurumaToIcu(absl::string_view pattern);

}  // namespace placer::tokenizer
