#include "model/code_tiles.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loader/quantized_layout.h"
#include "model/packed_block_header.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

// One output's 64 codes of k-block `kb_in_group` into `to`. Each 16 bytes of a 4-bit payload
// hold input j in their low nibbles and 16 + j in their high ones. kInputs: each 16 bytes
// twice in a row, low nibbles then high ones (inputs in order); kVnni: the k-block's 32 bytes
// twice, low nibbles then high ones (inputs 0-15, 32-47, 16-31, 48-63).
template <NibbleOrder kOrder>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void LayOutCodes(
    const QuantOperands& op, const uint8_t* block, int64_t kb_in_group, uint8_t* to) {
  const uint8_t* payload = block + kPackedBlockHeaderBytes;
  if (op.bits == 8) {
    _mm512_storeu_si512(to, _mm512_loadu_si512(payload + kb_in_group * kCodeTileInputs));
    return;
  }
  const __m256i bytes = _mm256_loadu_si256(
      reinterpret_cast<const __m256i*>(payload + kb_in_group * kCodeTileInputs / 2));
  __m512i twice, shifts;
  if constexpr (kOrder == NibbleOrder::kInputs) {
    twice = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0),
                                     _mm512_castsi256_si512(bytes));
    shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  } else {
    twice = _mm512_broadcast_i64x4(bytes);
    shifts = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  }
  _mm512_storeu_si512(to, _mm512_and_si512(_mm512_srlv_epi64(twice, shifts), _mm512_set1_epi8(0x0F)));
}

template <NibbleOrder kOrder>
__attribute__((target("avx512f,avx512bw"))) int64_t LayOut(const QuantOperands& op, int64_t s0,
                                                           int64_t count, CodeTiles& tiles) {
  const int64_t k_blocks = op.in / kCodeTileInputs, per_group = op.group_size / kCodeTileInputs;
  const int64_t passes = (count + kCodePassOutputs - 1) / kCodePassOutputs;
  tiles.a.resize(static_cast<size_t>(passes * k_blocks * 2 * kCodeTileBytes));
  tiles.scales.resize(static_cast<size_t>(passes * kCodePassOutputs * op.groups));
  tiles.offsets.resize(static_cast<size_t>(passes * kCodePassOutputs * op.groups));
  for (int64_t o = 0; o < passes * kCodePassOutputs; ++o) {
    const int64_t pass = o / kCodePassOutputs, in_pass = o % kCodePassOutputs;
    uint8_t* codes_of_o = tiles.a.data() + pass * k_blocks * 2 * kCodeTileBytes +
                          (in_pass / kCodeTileOutputs) * kCodeTileBytes +
                          (in_pass % kCodeTileOutputs) * kCodeTileInputs;
    float* scales = tiles.scales.data() + o * op.groups;
    float* offsets = tiles.offsets.data() + o * op.groups;
    if (o >= count) {
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        std::memset(codes_of_o + kb * 2 * kCodeTileBytes, 0, kCodeTileInputs);
      }
      std::fill_n(scales, op.groups, 0.0f);
      std::fill_n(offsets, op.groups, 0.0f);
      continue;
    }
    const uint8_t* blocks = op.w + (s0 + o) * op.groups * op.block_bytes;
    for (int64_t g = 0; g < op.groups; ++g) {
      const uint8_t* block = blocks + g * op.block_bytes;
      scales[g] = BlockScale(block);
      offsets[g] = BlockOffset(block);
      for (int64_t run = 0; run < per_group; ++run) {
        LayOutCodes<kOrder>(op, block, run, codes_of_o + (g * per_group + run) * 2 * kCodeTileBytes);
      }
    }
  }
  return passes;
}

}  // namespace

int64_t LayOutCodeTiles(const QuantOperands& op, int64_t s0, int64_t count, NibbleOrder order,
                        CodeTiles& tiles) {
  return order == NibbleOrder::kInputs ? LayOut<NibbleOrder::kInputs>(op, s0, count, tiles)
                                       : LayOut<NibbleOrder::kVnni>(op, s0, count, tiles);
}

CodeTiles& ThreadCodeTiles() {
  thread_local CodeTiles tiles;
  return tiles;
}

void TrimCodeTiles(CodeTiles& tiles) {
  constexpr size_t kKeptBytes = size_t{1} << 22;
  if (tiles.a.capacity() > kKeptBytes || tiles.sums.capacity() > kKeptBytes / 4) {
    tiles = CodeTiles();
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
