#include "model/stage_layout.h"

#include "base/status_macros.h"
#include "model/stage_layout_parse.h"

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
  PLACER_ASSIGN_OR_RETURN(
      std::vector<StageSequenceLayout> parsed,
      ParseStageLayout(layout, rows, pool != nullptr ? pool->block_count() : 0, window));
  DecodedLayout decoded;
  decoded.rows = rows;
  for (StageSequenceLayout& sequence : parsed) {
    SequenceRows rows_of{sequence.offset, sequence.length, sequence.start};
    if (sequence.capacity >= 0) {
      decoded.caches.push_back(KvCache::Mirror(pool, std::move(sequence.blocks), sequence.capacity,
                                               window, sequence.start));
      rows_of.cache = decoded.caches.back().get();
    }
    decoded.sequences.push_back(rows_of);
  }
  return decoded;
}

void RollbackStageStep(DecodedLayout& step) {
  for (const std::unique_ptr<KvCache>& cache : step.caches) cache->Rollback();
}

}  // namespace placer::model
