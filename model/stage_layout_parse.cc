#include "model/stage_layout_parse.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "placement/reserves.h"

namespace placer::model {

absl::StatusOr<std::vector<StageSequenceLayout>> ParseStageLayout(
    const std::vector<int64_t>& layout, int64_t rows, int64_t pool_blocks, int64_t window) {
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("stage layout: ", why));
  };
  size_t at = 0;
  auto next = [&](int64_t* value) {
    if (at >= layout.size()) return false;
    *value = layout[at++];
    return true;
  };
  int64_t count = 0;
  if (!next(&count) || count < 1 || count > rows) return bad("no sequences, or more than rows");
  std::vector<StageSequenceLayout> sequences;
  int64_t expected_offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    StageSequenceLayout sequence;
    int64_t blocks = 0;
    if (!next(&sequence.offset) || !next(&sequence.length) || !next(&sequence.start) ||
        !next(&sequence.capacity) || !next(&blocks)) {
      return bad(absl::StrCat("sequence ", i, " is cut short"));
    }
    // Compared without sums: the ints are anyone's, and may be near the int64 limits.
    if (sequence.offset != expected_offset || sequence.length < 1 ||
        sequence.length > rows - sequence.offset || sequence.start < 0) {
      return bad(absl::StrCat("sequence ", i, ": rows ", sequence.offset, "+", sequence.length,
                              " from position ", sequence.start, " do not fit ", rows, " rows"));
    }
    expected_offset += sequence.length;
    if (sequence.capacity >= 0) {
      if (blocks < 1 || blocks > pool_blocks || static_cast<int64_t>(layout.size() - at) < blocks) {
        return bad(absl::StrCat("sequence ", i, ": ", blocks, " KV blocks"));
      }
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t block = layout[at++];
        if (block < 0 || block >= pool_blocks) {
          return bad(absl::StrCat("sequence ", i, ": KV block ", block, " outside the pool of ",
                                  pool_blocks));
        }
        sequence.blocks.push_back(static_cast<int32_t>(block));
      }
      const int64_t held = blocks * placement::kKvBlockPositions;
      if (sequence.start > sequence.capacity - sequence.length || (held < sequence.capacity && window <= 0) ||
          (held < sequence.capacity && window > held)) {
        return bad(absl::StrCat("sequence ", i, ": capacity ", sequence.capacity, " for ", held,
                                " held positions"));
      }
    } else {
      sequence.capacity = -1;
    }
    sequences.push_back(std::move(sequence));
  }
  if (expected_offset != rows || at != layout.size()) {
    return bad(absl::StrCat("the sequences cover ", expected_offset, " of ", rows, " rows"));
  }
  return sequences;
}

}  // namespace placer::model
