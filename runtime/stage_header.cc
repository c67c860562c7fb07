#include "runtime/stage_header.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace placer::runtime {

absl::StatusOr<StageHeader> ParseStageHeader(const int64_t* ints) {
  StageHeader header;
  header.kind = static_cast<StageMessageKind>(ints[0]);
  header.step = ints[1];
  header.layout_ints = ints[2];
  header.rows = ints[3];
  header.width = ints[4];
  header.dtype = ints[5];
  header.kv_blocks_in_use = ints[6];
  const bool no_hidden = header.rows == 0 || header.width == 0;
  const bool known_dtype = header.dtype == kWireF32 || header.dtype == kWireBF16 ||
                           header.dtype == kWireF16 || (header.rows == 0 && header.width == 0);
  const bool known_kind = ints[0] >= static_cast<int64_t>(StageMessageKind::kStep) &&
                          ints[0] <= static_cast<int64_t>(StageMessageKind::kRollback);
  if (!known_kind || header.layout_ints < 0 || header.layout_ints > kMaxLayoutInts ||
      header.rows < 0 || header.width < 0 ||
      (header.width > 0 && header.rows > kMaxHiddenElements / header.width) || !known_dtype ||
      (header.kind == StageMessageKind::kHeartbeat && (header.layout_ints != 0 || !no_hidden)) ||
      header.kv_blocks_in_use < 0 ||
      header.kv_blocks_in_use > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed header (kind ", ints[0], ", ", header.layout_ints, " layout ints, ",
        header.rows, "x", header.width, ", dtype ", header.dtype, ", ",
        header.kv_blocks_in_use, " KV blocks in use)"));
  }
  return header;
}

}  // namespace placer::runtime
