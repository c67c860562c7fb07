// The AMX-INT8 prompt-chunk kernel for float32 rows as digits (digit_tiles.h says what it
// promises).
//
// A call's outputs go up to 128 at a time: their codes are laid out for the whole input as
// bytes in a per-thread buffer (code_tiles.h, in input order), then for each pair of row
// tiles, each block of 128 inputs and each stripe of 16 outputs, six C tiles (3 digits x 2 row
// tiles) sum the block's two k-blocks, fed per k-block by one A load and six B loads (the
// block's B tiles, 12 KiB, stay in L1 across stripes); at the block's end the six C tiles are
// stored and their digit sums combined and scaled into the outputs' float32 sums
// ([output][row]); at the end the sums go to y (tile_output_sums.h).
#include "model/digit_tiles.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "model/amx_tiles.h"
#include "model/code_tiles.h"
#include "model/input_digits.h"
#include "model/register_transpose.h"
#include "model/spinning_workers.h"
#include "model/tile_output_sums.h"

namespace placer::model {
namespace {

constexpr int64_t kTileRows = 16;  // chunk rows per B tile
constexpr int64_t kStripe = kCodeTileOutputs;
constexpr int64_t kKBlock = kCodeTileInputs;
constexpr int64_t kBlock = kDigitBlock;  // inputs per step t
constexpr int64_t kKPerBlock = kBlock / kKBlock;
constexpr int64_t kTileBytes = kCodeTileBytes;  // every tile: 16 rows of 64 bytes
constexpr int64_t kPairOutputs = kCodePassOutputs;

// Every row tile pair by the laid-out outputs into scratch.sums. Tiles: 0-5 sums (digit j of
// row tile r in tile 2j + r), 6 a stripe's codes, 7 a row tile's digit.
template <bool Signed8>
__attribute__((target("amx-tile,amx-int8,avx512f"))) void MultiplyOutputs(
    const QuantOperands& op, const DigitTileInputs& inputs, int64_t passes, CodeTiles& scratch) {
  const int64_t k_blocks = op.in / kKBlock, blocks = op.in / kBlock;
  const int64_t blocks_per_group = op.group_size / kBlock;
  const int64_t columns = inputs.row_tiles * kTileRows;
  const int64_t row_tile_bytes = k_blocks * kDigitsPerInput * kTileBytes;
  scratch.sums.resize(static_cast<size_t>(passes * kPairOutputs * columns));
  alignas(64) int32_t tile_sums[2 * kDigitsPerInput][kStripe][kTileRows];
  const __m512 radix = _mm512_set1_ps(256.0f), radix2 = _mm512_set1_ps(65536.0f);
  for (int64_t rt = 0; rt < inputs.row_tiles; rt += 2) {
    const int8_t* b_of_pair = inputs.digits.data() + rt * row_tile_bytes;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t g = b / blocks_per_group;
      const bool group_starts = b % blocks_per_group == 0;
      for (int64_t stripe = 0; stripe < 2 * passes; ++stripe) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        _tile_zero(4);
        _tile_zero(5);
        for (int64_t kb = b * kKPerBlock; kb < (b + 1) * kKPerBlock; ++kb) {
          _tile_loadd(6, CodeTile(scratch, k_blocks, stripe / 2, kb, stripe % 2), 64);
          const int8_t* first = b_of_pair + kb * kDigitsPerInput * kTileBytes;
          const int8_t* second = first + row_tile_bytes;
          // Digit j of row tile r into C tile 2j + r: tdpbssd for 8-bit codes (signed),
          // tdpbusd for 4-bit ones (0-15). Tile numbers are immediates, hence the macro.
#define PLACER_DIGIT_PRODUCT(digits, c)  \
  _tile_loadd(7, digits, 64);            \
  if constexpr (Signed8) {               \
    _tile_dpbssd(c, 6, 7);               \
  } else {                               \
    _tile_dpbusd(c, 6, 7);               \
  }
          PLACER_DIGIT_PRODUCT(first, 0)
          PLACER_DIGIT_PRODUCT(first + kTileBytes, 2)
          PLACER_DIGIT_PRODUCT(first + 2 * kTileBytes, 4)
          PLACER_DIGIT_PRODUCT(second, 1)
          PLACER_DIGIT_PRODUCT(second + kTileBytes, 3)
          PLACER_DIGIT_PRODUCT(second + 2 * kTileBytes, 5)
#undef PLACER_DIGIT_PRODUCT
        }
        _tile_stored(0, tile_sums[0], 64);
        _tile_stored(1, tile_sums[1], 64);
        _tile_stored(2, tile_sums[2], 64);
        _tile_stored(3, tile_sums[3], 64);
        _tile_stored(4, tile_sums[4], 64);
        _tile_stored(5, tile_sums[5], 64);
        for (int r = 0; r < 2; ++r) {
          const int64_t row_tile = rt + r;
          const __m512 steps = _mm512_loadu_ps(inputs.steps.data() + (row_tile * blocks + b) * kTileRows);
          const __m512 group_sums = _mm512_loadu_ps(
              inputs.group_sums.data() + (row_tile * op.groups + g) * kTileRows);
          for (int64_t m = 0; m < kStripe; ++m) {
            const int64_t o = stripe * kStripe + m;
            float* acc = scratch.sums.data() + o * columns + row_tile * kTileRows;
            const size_t block = static_cast<size_t>(o * op.groups + g);
            const __m512 value = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(_mm512_load_si512(tile_sums[r][m])), radix2,
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile_sums[2 + r][m])), radix,
                                _mm512_cvtepi32_ps(_mm512_load_si512(tile_sums[4 + r][m]))));
            __m512 sum = b == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc);
            sum = _mm512_fmadd_ps(value, _mm512_mul_ps(_mm512_set1_ps(scratch.scales[block]), steps),
                                  sum);
            if (group_starts) {
              sum = _mm512_fmadd_ps(_mm512_set1_ps(scratch.offsets[block]), group_sums, sum);
            }
            _mm512_storeu_ps(acc, sum);
          }
        }
      }
    }
  }
}

// Each row tile's k-blocks as B tiles: per digit, the 16 rows' 64 digits (16 quads each)
// transposed so that tile row k holds quad k of every row. Rows past op.rows are zeros.
__attribute__((target("avx512f,avx512bw,avx512dq"))) void ArrangeDigits(const QuantOperands& op,
                                                                         DigitTileInputs* inputs,
                                                                         int64_t t0, int64_t t1) {
  const int64_t k_blocks = op.in / kKBlock, blocks = op.in / kBlock;
  const int64_t blocks_per_group = op.group_size / kBlock;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t valid = std::clamp<int64_t>(op.rows - t * kTileRows, 0, kTileRows);
    for (int64_t b = 0; b < blocks; ++b) {
      DigitScale scales[kTileRows];
      for (int64_t i = 0; i < valid; ++i) {
        const int64_t row = t * kTileRows + i;
        scales[i] = DigitScaleOf(op.x + row * op.in + b * kBlock,
                                 op.x_group_sums[row * op.groups + b / blocks_per_group]);
        inputs->steps[static_cast<size_t>((t * blocks + b) * kTileRows + i)] = scales[i].step;
      }
      for (int64_t kb = b * kKPerBlock; kb < (b + 1) * kKPerBlock; ++kb) {
        __m512i rows[kDigitsPerInput][16];
        for (int64_t i = 0; i < 16; ++i) {
          if (i >= valid) {
            for (int j = 0; j < kDigitsPerInput; ++j) rows[j][i] = _mm512_setzero_si512();
            continue;
          }
          const float* x = op.x + (t * kTileRows + i) * op.in + kb * kKBlock;
          __m128i quarter[4][kDigitsPerInput];
          for (int q = 0; q < 4; ++q) DigitsOf16(x + 16 * q, scales[i], quarter[q]);
          for (int j = 0; j < kDigitsPerInput; ++j) {
            __m512i whole = _mm512_castsi128_si512(quarter[0][j]);
            whole = _mm512_inserti32x4(whole, quarter[1][j], 1);
            whole = _mm512_inserti32x4(whole, quarter[2][j], 2);
            rows[j][i] = _mm512_inserti32x4(whole, quarter[3][j], 3);
          }
        }
        int8_t* tiles = inputs->digits.data() + (t * k_blocks + kb) * kDigitsPerInput * kTileBytes;
        for (int j = 0; j < kDigitsPerInput; ++j) {
          __m512 as_floats[16];
          for (int64_t i = 0; i < 16; ++i) as_floats[i] = _mm512_castsi512_ps(rows[j][i]);
          Transpose16x16(as_floats);
          for (int64_t k = 0; k < 16; ++k) {
            _mm512_storeu_ps(tiles + j * kTileBytes + k * 64, as_floats[k]);
          }
        }
      }
    }
  }
}

}  // namespace

bool DigitTilesRun() {
  static const bool runs = [] {
    const char* choice = std::getenv("PLACER_DIGIT_TILES");
    if (choice != nullptr && std::strcmp(choice, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("amx-int8") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           AmxTilesUsable();
  }();
  return runs;
}

bool DigitTilesApply(const loader::PackedLayout& layout) {
  return (layout.bits == 4 || layout.bits == 8) && layout.group_size > 0 &&
         layout.group_size % kBlock == 0 && layout.in % layout.group_size == 0;
}

DigitTileInputs& DigitTileInputsBuffer() {
  thread_local DigitTileInputs inputs;
  constexpr size_t kKeptBytes = size_t{1} << 22;
  if (inputs.digits.capacity() > kKeptBytes) inputs = DigitTileInputs();
  return inputs;
}

void ArrangeDigitTileInputs(const QuantOperands& op, DigitTileInputs* inputs) {
  const int64_t blocks = op.in / kBlock;
  int64_t row_tiles = (op.rows + kTileRows - 1) / kTileRows;
  row_tiles += row_tiles % 2;
  inputs->row_tiles = row_tiles;
  inputs->digits.resize(static_cast<size_t>(row_tiles * op.in * kDigitsPerInput * kTileRows));
  inputs->steps.assign(static_cast<size_t>(row_tiles * blocks * kTileRows), 0.0f);
  inputs->group_sums.assign(static_cast<size_t>(row_tiles * op.groups * kTileRows), 0.0f);
  for (int64_t r = 0; r < op.rows; ++r) {
    for (int64_t g = 0; g < op.groups; ++g) {
      inputs->group_sums[static_cast<size_t>(((r / kTileRows) * op.groups + g) * kTileRows +
                                             r % kTileRows)] = op.x_group_sums[r * op.groups + g];
    }
  }
  // Row tiles on the kernels' threads: on the calling thread alone, the helpers waited out
  // the digits of every prompt chunk (in-process prefill of the small preset ~5 % faster).
  const SpinningWorkers::RangeFn arrange = [&](int64_t t0, int64_t t1) {
    ArrangeDigits(op, inputs, t0, t1);
  };
  if (!SpinningWorkers::Shared().TryRun(row_tiles, arrange)) arrange(0, row_tiles);
}

void QuantizedChunkRowsDigitTiles(const QuantOperands& op, const DigitTileInputs& inputs,
                                  int64_t n0, int64_t n1) {
  CodeTiles& scratch = ThreadCodeTiles();
  ConfigureSquareTiles();
  for (int64_t s0 = n0; s0 < n1; s0 += kMostCodeOutputs) {
    const int64_t count = std::min(kMostCodeOutputs, n1 - s0);
    const int64_t passes = LayOutCodeTiles(op, s0, count, NibbleOrder::kInputs, scratch);
    if (op.bits == 8) {
      MultiplyOutputs<true>(op, inputs, passes, scratch);
    } else {
      MultiplyOutputs<false>(op, inputs, passes, scratch);
    }
    StoreTileOutputSums(op, scratch.sums.data(), inputs.row_tiles * kTileRows, s0, count);
  }
  ReleaseTiles();
  TrimCodeTiles(scratch);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
