// The AMX prompt-chunk kernel for 4-bit and 8-bit weights (quantized_tiles.h says what it
// promises).
//
// A call's outputs go up to 128 at a time: their codes are unpacked for the whole input into a
// per-thread buffer (A tiles, 32 outputs a pass), then for each pair of row tiles and each span
// (a group, or 128 inputs of a group of 128s), every pass of 32 outputs runs the span's k-blocks
// as four C tiles (2 stripes x 2 row tiles) fed by 2 A and, per part, 2 B loads: 12 tdpbf16ps
// per 8 tile loads, the span's B tiles (24 KiB for 128 inputs) read from L1 by every pass after
// the first. Streaming each pass's
// B tiles from L2 instead ran at ~83 cycles a tdpbf16ps on an Emerald Rapids VM (~18-28 with
// the operands in tiles, 30-46 loading them from L1 or L2, 52-77 beyond). At the end of each
// span the C tiles are stored and scaled into the outputs' float32 sums ([output][row]) by the
// group's s (and m at the group's end); at the end the sums go to y (tile_output_sums.h).
#include "model/quantized_tiles.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "model/amx_tiles.h"
#include "model/packed_block_header.h"
#include "model/register_transpose.h"
#include "model/tile_output_sums.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

using loader::kPackedBlockHeaderBytes;

constexpr int64_t kTileRows = 16;                   // chunk rows per B tile
constexpr int64_t kStripe = 16;                     // outputs per A tile
constexpr int64_t kKBlock = 32;                     // inputs per tile
constexpr int64_t kParts = 3;                       // hi, mid, lo
constexpr int64_t kPairInts = kKBlock / 2 * kTileRows;  // one B tile, in pairs
constexpr int64_t kATileWords = kStripe * kKBlock;  // one A tile, in BF16 values
constexpr int64_t kPairOutputs = 2 * kStripe;       // outputs per pass
constexpr int64_t kMostOutputs = 4 * kPairOutputs;  // outputs unpacked at once

// BF16 bits of (i & 15): vpermw reads an index's low 5 bits, so a low nibble's byte needs no mask.
alignas(64) constexpr uint16_t kCodeValues[32] = {
    0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0,
    0x4100, 0x4110, 0x4120, 0x4130, 0x4140, 0x4150, 0x4160, 0x4170,
    0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0,
    0x4100, 0x4110, 0x4120, 0x4130, 0x4140, 0x4150, 0x4160, 0x4170};

// 16 payload bytes (32 codes: byte j holds input j in its low nibble, input 16 + j in its high
// one) to 32 BF16 values in input order.
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline void UnpackRun4(
    const uint8_t* payload, uint16_t* to) {
  const __m512i table = _mm512_load_si512(kCodeValues);
  const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004,
                                          0x0004000400040004, 0x0004000400040004, 0, 0, 0, 0);
  const __m256i twice = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(payload)));
  const __m512i codes = _mm512_srlv_epi16(_mm512_cvtepu8_epi16(twice), shifts);
  _mm512_storeu_si512(to, _mm512_permutexvar_epi16(codes, table));
}

// Word i: the upper half of float i of two vectors (floats 0-15 of the first, 16-31 of the
// second), for _mm512_permutex2var_epi16.
__attribute__((target("avx512f"), always_inline)) inline __m512i UpperHalves() {
  alignas(64) static constexpr uint16_t kUpperHalves[32] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_load_si512(kUpperHalves);
}

// 32 int8 codes to 32 BF16 values: each code is a float32 with at most 8 significant bits, so
// its upper half is the same number in BF16.
__attribute__((target("avx2,avx512f,avx512bw"), always_inline)) inline void UnpackRun8(
    const uint8_t* payload, uint16_t* to) {
  const __m512 first = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(payload))));
  const __m512 second = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(payload + 16))));
  _mm512_storeu_si512(to, _mm512_permutex2var_epi16(_mm512_castps_si512(first), UpperHalves(),
                                                    _mm512_castps_si512(second)));
}

// k-blocks per span: a span is the inputs whose tile sums are added into the outputs' float32
// sums at once; 128 inputs where the group is a multiple of 128 (a whole-row group of an 8-bit
// weight would otherwise add thousands of products into one float32), else the group.
int64_t KBlocksPerSpan(const QuantOperands& op) {
  return (op.group_size % 128 == 0 ? 128 : op.group_size) / kKBlock;
}

struct Scratch {
  base::CacheLineVector<uint16_t> a;             // [passes][in / 32][2][16][32]: A tiles
  base::CacheLineVector<float> scales, offsets;  // [passes · 32][groups]
  base::CacheLineVector<float> sums;             // [passes · 32][row_tiles · 16]
};

// Outputs [s0, s0 + count) (count <= kMostOutputs) unpacked into scratch.a, their blocks' s and
// m alongside; the outputs past count up to a whole pass as zero codes. Returns the passes.
__attribute__((target("avx2,avx512f,avx512bw"))) int64_t UnpackOutputs(const QuantOperands& op,
                                                                      int64_t s0, int64_t count,
                                                                      Scratch& scratch) {
  const int64_t k_blocks = op.in / kKBlock, runs_per_group = op.group_size / kKBlock;
  const int64_t passes = (count + kPairOutputs - 1) / kPairOutputs;
  scratch.a.resize(static_cast<size_t>(passes * k_blocks * 2 * kATileWords));
  scratch.scales.resize(static_cast<size_t>(passes * kPairOutputs * op.groups));
  scratch.offsets.resize(static_cast<size_t>(passes * kPairOutputs * op.groups));
  for (int64_t o = 0; o < passes * kPairOutputs; ++o) {
    const int64_t pass = o / kPairOutputs, in_pass = o % kPairOutputs;
    uint16_t* rows_of_o = scratch.a.data() + pass * k_blocks * 2 * kATileWords +
                          (in_pass / kStripe) * kATileWords + (in_pass % kStripe) * kKBlock;
    float* scales = scratch.scales.data() + o * op.groups;
    float* offsets = scratch.offsets.data() + o * op.groups;
    if (o >= count) {
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        std::memset(rows_of_o + kb * 2 * kATileWords, 0, kKBlock * sizeof(uint16_t));
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
      for (int64_t run = 0; run < runs_per_group; ++run) {
        const int64_t kb = g * runs_per_group + run;
        const uint8_t* payload = block + kPackedBlockHeaderBytes + run * kKBlock * op.bits / 8;
        if (op.bits == 4) {
          UnpackRun4(payload, rows_of_o + kb * 2 * kATileWords);
        } else {
          UnpackRun8(payload, rows_of_o + kb * 2 * kATileWords);
        }
      }
    }
  }
  return passes;
}

// Every row tile pair by the unpacked outputs into scratch.sums. Tiles: 0-3 sums (stripe 0 x
// row tiles 0, 1; stripe 1 x row tiles 0, 1), 4-5 a pass's stripes' codes, 6-7 the row tiles'
// parts.
__attribute__((target("amx-tile,amx-bf16,avx512f"))) void MultiplyOutputs(
    const QuantOperands& op, const QuantizedTileInputs& inputs, int64_t passes, Scratch& scratch) {
  const int64_t k_blocks = op.in / kKBlock, runs_per_group = op.group_size / kKBlock;
  const int64_t runs_per_span = KBlocksPerSpan(op);
  const int64_t columns = inputs.row_tiles * kTileRows;
  const int64_t parts = inputs.parts, row_tile_ints = k_blocks * parts * kPairInts;
  scratch.sums.resize(static_cast<size_t>(passes * kPairOutputs * columns));
  alignas(64) float tile_sums[4][kStripe][kTileRows];
  for (int64_t rt = 0; rt < inputs.row_tiles; rt += 2) {
    const uint32_t* b0 = inputs.pairs.data() + rt * row_tile_ints;
    const uint32_t* b1 = b0 + row_tile_ints;
    for (int64_t span_start = 0; span_start < k_blocks; span_start += runs_per_span) {
      const int64_t g = span_start / runs_per_group;
      const bool group_ends = (span_start + runs_per_span) % runs_per_group == 0;
      for (int64_t pass = 0; pass < passes; ++pass) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = span_start; kb < span_start + runs_per_span; ++kb) {
          const uint16_t* a = scratch.a.data() + (pass * k_blocks + kb) * 2 * kATileWords;
          _tile_loadd(4, a, 64);
          _tile_loadd(5, a + kATileWords, 64);
          for (int64_t part = 0; part < parts; ++part) {
            const int64_t at = (kb * parts + part) * kPairInts;
            _tile_loadd(6, b0 + at, 64);
            _tile_loadd(7, b1 + at, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
          }
        }
        _tile_stored(0, tile_sums[0], 64);
        _tile_stored(1, tile_sums[1], 64);
        _tile_stored(2, tile_sums[2], 64);
        _tile_stored(3, tile_sums[3], 64);
        for (int t = 0; t < 4; ++t) {
          const int64_t stripe = t / 2, row_tile = rt + t % 2;
          const __m512 group_sums = _mm512_loadu_ps(
              inputs.group_sums.data() + (row_tile * op.groups + g) * kTileRows);
          for (int64_t m = 0; m < kStripe; ++m) {
            const int64_t o = pass * kPairOutputs + stripe * kStripe + m;
            float* acc = scratch.sums.data() + o * columns + row_tile * kTileRows;
            const size_t block = static_cast<size_t>(o * op.groups + g);
            __m512 sum = span_start == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc);
            sum = _mm512_fmadd_ps(_mm512_set1_ps(scratch.scales[block]),
                                  _mm512_load_ps(tile_sums[t][m]), sum);
            if (group_ends) {
              sum = _mm512_fmadd_ps(_mm512_set1_ps(scratch.offsets[block]), group_sums, sum);
            }
            _mm512_storeu_ps(acc, sum);
          }
        }
      }
    }
  }
}

// Input x as three BF16 parts whose sum is x: the top 8 significant bits, the next 8 of what is
// left, and the rest (at most 8 bits, so exact), each part's bits in the upper half of a float.
__attribute__((target("avx512f"), always_inline)) inline void SplitIntoParts(__m512 x,
                                                                              __m512 parts[3]) {
  const __m512i upper = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), upper));
  const __m512 rest = _mm512_sub_ps(x, hi);
  const __m512 mid = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(rest), upper));
  parts[0] = hi;
  parts[1] = mid;
  parts[2] = _mm512_sub_ps(rest, mid);
}

// Every row tile's B tiles: each row's 32 inputs of a k-block split into parts, each part's
// 16 pairs a row of [16 rows][16 pairs], transposed into the tile's [16 pairs][16 rows]. Rows
// past op.rows (the last tile's, and a padding tile's) are zeros.
__attribute__((target("avx512f,avx512bw"))) void SplitRows(const QuantOperands& op,
                                                           QuantizedTileInputs* inputs) {
  const int64_t k_blocks = op.in / kKBlock;
  const __m512i pick = UpperHalves();  // inputs 0-15 from the first vector, 16-31 the second
  const int64_t parts = inputs->parts;
  for (int64_t t = 0; t < inputs->row_tiles; ++t) {
    const int64_t valid = std::clamp<int64_t>(op.rows - t * kTileRows, 0, kTileRows);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      __m512 parts_of_rows[kParts][16];
      for (int64_t i = 0; i < 16; ++i) {
        if (i >= valid) {
          for (int64_t part = 0; part < parts; ++part) parts_of_rows[part][i] = _mm512_setzero_ps();
          continue;
        }
        const float* inputs_of_row = op.x + (t * kTileRows + i) * op.in + kb * kKBlock;
        __m512 first[3], second[3];
        SplitIntoParts(_mm512_loadu_ps(inputs_of_row), first);
        SplitIntoParts(_mm512_loadu_ps(inputs_of_row + 16), second);
        for (int64_t part = 0; part < parts; ++part) {
          parts_of_rows[part][i] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(
              _mm512_castps_si512(first[part]), pick, _mm512_castps_si512(second[part])));
        }
      }
      uint32_t* tiles = inputs->pairs.data() + (t * k_blocks + kb) * parts * kPairInts;
      for (int64_t part = 0; part < parts; ++part) {
        Transpose16x16(parts_of_rows[part]);
        for (int64_t j = 0; j < 16; ++j) {
          _mm512_storeu_ps(tiles + part * kPairInts + j * kTileRows, parts_of_rows[part][j]);
        }
      }
    }
  }
}

}  // namespace

bool QuantizedTilesKernelRuns() {
  static const bool runs = [] {
    const char* choice = std::getenv("PLACER_QUANTIZED_TILES");
    if (choice != nullptr && std::strcmp(choice, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx2") && AmxTilesUsable();
  }();
  return runs;
}

bool QuantizedTilesKernelApplies(const loader::PackedLayout& layout) {
  return (layout.bits == 4 || layout.bits == 8) && layout.group_size % kKBlock == 0 &&
         layout.in % kKBlock == 0;
}

QuantizedTileInputs& QuantizedTileInputsBuffer() {
  thread_local QuantizedTileInputs inputs;
  constexpr size_t kKeptInts = size_t{1} << 20;
  if (inputs.pairs.capacity() > kKeptInts) inputs = QuantizedTileInputs();
  return inputs;
}

void ArrangeQuantizedTileInputs(const QuantOperands& op, bool bf16_rows, QuantizedTileInputs* inputs) {
  const int64_t k_blocks = op.in / kKBlock;
  inputs->parts = bf16_rows ? 1 : kParts;
  int64_t row_tiles = (op.rows + kTileRows - 1) / kTileRows;
  row_tiles += row_tiles % 2;
  inputs->row_tiles = row_tiles;
  inputs->pairs.resize(static_cast<size_t>(row_tiles * k_blocks * inputs->parts * kPairInts));
  inputs->group_sums.assign(static_cast<size_t>(row_tiles * op.groups * kTileRows), 0.0f);
  for (int64_t r = 0; r < op.rows; ++r) {
    for (int64_t g = 0; g < op.groups; ++g) {
      inputs->group_sums[static_cast<size_t>(((r / kTileRows) * op.groups + g) * kTileRows +
                                             r % kTileRows)] = op.x_group_sums[r * op.groups + g];
    }
  }
  SplitRows(op, inputs);
}

void QuantizedChunkRowsTiles(const QuantOperands& op, const QuantizedTileInputs& inputs, int64_t n0,
                                 int64_t n1) {
  thread_local Scratch scratch;
  ConfigureSquareTiles();
  for (int64_t s0 = n0; s0 < n1; s0 += kMostOutputs) {
    const int64_t count = std::min(kMostOutputs, n1 - s0);
    const int64_t passes = UnpackOutputs(op, s0, count, scratch);
    MultiplyOutputs(op, inputs, passes, scratch);
    StoreTileOutputSums(op, scratch.sums.data(), inputs.row_tiles * kTileRows, s0, count);
  }
  ReleaseTiles();
  constexpr size_t kKeptWords = size_t{1} << 20;
  if (scratch.a.capacity() > kKeptWords || scratch.sums.capacity() > kKeptWords) scratch = Scratch();
}

}  // namespace placer::model

#pragma GCC diagnostic pop
