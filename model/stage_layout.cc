#include "model/stage_layout.h"

#include "absl/strings/str_cat.h"

namespace placer::model {

std::vector<int64_t> EncodeStageLayout(const std::vector<SequenceRows>& sequences) {
  std::vector<int64_t> out{static_cast<int64_t>(sequences.size())};
  for (const SequenceRows& rows : sequences) {
    out.insert(out.end(), {rows.offset, rows.length, rows.start});
    if (rows.cache == nullptr) {
      out.insert(out.end(), {-1, 0});
      continue;
    }
    out.push_back(rows.cache->capacity());
    out.push_back(static_cast<int64_t>(rows.cache->blocks().size()));
    out.insert(out.end(), rows.cache->blocks().begin(), rows.cache->blocks().end());
  }
  return out;
}

absl::StatusOr<DecodedLayout> DecodeStageLayout(const std::vector<int64_t>& layout, int64_t rows,
                                                const std::shared_ptr<KvBlockPool>& pool,
                                                int64_t window) {
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
  DecodedLayout decoded;
  decoded.rows = rows;
  int64_t expected_offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    SequenceRows sequence;
    int64_t capacity = 0, blocks = 0;
    if (!next(&sequence.offset) || !next(&sequence.length) || !next(&sequence.start) ||
        !next(&capacity) || !next(&blocks)) {
      return bad(absl::StrCat("sequence ", i, " is cut short"));
    }
    if (sequence.offset != expected_offset || sequence.length < 1 ||
        sequence.offset + sequence.length > rows || sequence.start < 0) {
      return bad(absl::StrCat("sequence ", i, ": rows ", sequence.offset, "+", sequence.length,
                              " from position ", sequence.start, " do not fit ", rows, " rows"));
    }
    expected_offset += sequence.length;
    if (capacity >= 0) {
      if (pool == nullptr || blocks < 1 || blocks > pool->block_count() ||
          static_cast<int64_t>(layout.size() - at) < blocks) {
        return bad(absl::StrCat("sequence ", i, ": ", blocks, " KV blocks"));
      }
      std::vector<int32_t> table;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t block = layout[at++];
        if (block < 0 || block >= pool->block_count()) {
          return bad(absl::StrCat("sequence ", i, ": KV block ", block, " outside the pool of ",
                                  pool->block_count()));
        }
        table.push_back(static_cast<int32_t>(block));
      }
      const int64_t held = blocks * KvBlockPool::kBlockPositions;
      if (capacity < sequence.start + sequence.length || (held < capacity && window <= 0) ||
          (held < capacity && window > held)) {
        return bad(absl::StrCat("sequence ", i, ": capacity ", capacity, " for ", held,
                                " held positions"));
      }
      decoded.caches.push_back(
          KvCache::Mirror(pool, std::move(table), capacity, window, sequence.start));
      sequence.cache = decoded.caches.back().get();
    }
    decoded.sequences.push_back(sequence);
  }
  if (expected_offset != rows || at != layout.size()) {
    return bad(absl::StrCat("the sequences cover ", expected_offset, " of ", rows, " rows"));
  }
  return decoded;
}

}  // namespace placer::model
