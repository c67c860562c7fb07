#include "placement/plan.h"

#include "absl/strings/str_cat.h"

namespace placer::placement {

absl::StatusOr<Strategy> ParseStrategy(absl::string_view text) {
  if (text == "sequential") return Strategy::kSequential;
  if (text == "balanced" || text == "auto") return Strategy::kBalanced;
  if (text == "balanced_low_0") return Strategy::kBalancedLow0;
  return absl::InvalidArgumentError(absl::StrCat(
      "--strategy '", text, "': expected sequential, balanced or balanced_low_0"));
}

absl::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kSequential:
      return "sequential";
    case Strategy::kBalanced:
      return "balanced";
    case Strategy::kBalancedLow0:
      return "balanced_low_0";
  }
  return "unknown";
}

}  // namespace placer::placement
