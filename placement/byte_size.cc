#include "placement/byte_size.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace placer::placement {
namespace {

struct Unit {
  absl::string_view name;
  double multiplier;
};

// Longest names first so "GiB" is not read as "B" with a junk number.
constexpr Unit kUnits[] = {
    {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024},
    {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"KB", 1e3},     {"MB", 1e6},            {"GB", 1e9},
    {"TB", 1e12},    {"B", 1.0},
};

bool IsNumberChar(char c) { return absl::ascii_isdigit(c) || c == '.'; }

}  // namespace

absl::StatusOr<std::uint64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view original = text;
  text = absl::StripAsciiWhitespace(text);
  auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size '", original, "': ", why,
                     " (write e.g. 20GiB, 512MiB, 1.5GB or a number of bytes; "
                     "units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"));
  };
  if (text.empty()) return error("empty");
  if (text[0] == '-') return error("negative");
  std::size_t number_end = 0;
  while (number_end < text.size() && IsNumberChar(text[number_end])) ++number_end;
  const absl::string_view number = text.substr(0, number_end);
  const absl::string_view unit =
      absl::StripAsciiWhitespace(text.substr(number_end));
  if (number.empty()) return error("no number");
  if (number.find('.') != number.rfind('.')) return error("malformed number");
  if (number == ".") return error("malformed number");

  double multiplier = 1.0;
  if (!unit.empty()) {
    bool known = false;
    for (const Unit& candidate : kUnits) {
      if (unit == candidate.name) {
        multiplier = candidate.multiplier;
        known = true;
        break;
      }
    }
    if (!known) return error(absl::StrCat("unknown unit '", unit, "'"));
  }

  const std::string number_text(number);
  char* parse_end = nullptr;
  const double value = std::strtod(number_text.c_str(), &parse_end);
  if (parse_end != number_text.c_str() + number_text.size()) {
    return error("malformed number");
  }
  const double bytes = value * multiplier;
  // 2^64 is exactly representable; anything at or above it overflows.
  if (!std::isfinite(bytes) || bytes >= 18446744073709551616.0) {
    return error("too large");
  }
  if (unit.empty() || unit == "B") {
    if (value != std::floor(value)) return error("fractional number of bytes");
  }
  return static_cast<std::uint64_t>(std::floor(bytes));
}

std::string FormatBytes(std::uint64_t bytes) {
  constexpr const char* kNames[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  if (value >= 100.0 || value == std::floor(value)) {
    return absl::StrFormat("%.0f %s", value, kNames[unit]);
  }
  return absl::StrFormat("%.2f %s", value, kNames[unit]);
}

}  // namespace placer::placement
