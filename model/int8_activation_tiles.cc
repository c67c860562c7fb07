// The AMX-INT8 prompt-chunk kernel for int8 activations (int8_activation_tiles.h says what it
// promises).
//
// A call's outputs go up to 128 at a time: their codes are laid out for the whole input in a
// per-thread buffer (code_tiles.h; 4-bit codes in the order the activations' codes are
// stored), then for each pair of row
// tiles and each activation block, every pass runs the block's k-blocks as four C tiles (2
// stripes x 2 row tiles) fed by 2 A and 2 B loads, and the four C tiles' int32 sums are scaled
// into the outputs' float32 sums ([output][row]); at the end the sums go to y
// (tile_output_sums.h). The layout of quantized_tiles.cc, whose B tiles stay in L1 across
// passes (there, streaming them from L2 cost ~3x a product).
#include "model/int8_activation_tiles.h"

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
#include "model/register_transpose.h"
#include "model/tile_output_sums.h"

namespace placer::model {
namespace {

constexpr int64_t kTileRows = 16;  // chunk rows per B tile
constexpr int64_t kStripe = kCodeTileOutputs;
constexpr int64_t kKBlock = kCodeTileInputs;
constexpr int64_t kTileBytes = kCodeTileBytes;  // every tile: 16 rows of 64 bytes
constexpr int64_t kPairOutputs = kCodePassOutputs;

// Every row tile pair by the laid-out outputs into scratch.sums. Tiles: 0-3 sums (stripe 0 x
// row tiles 0, 1; stripe 1 x row tiles 0, 1), 4-5 a pass's stripes' codes, 6-7 the row tiles'
// activation codes. Signed8: tdpbssd (8-bit codes are signed), else tdpbusd (4-bit: 0-15).
template <bool Signed8>
__attribute__((target("amx-tile,amx-int8,avx512f"))) void MultiplyOutputs(
    const QuantOperands& op, const Int8ActivationTileInputs& inputs, int64_t passes,
    CodeTiles& scratch) {
  const int64_t k_blocks = op.in / kKBlock, blocks = op.in / inputs.block;
  const int64_t k_per_block = inputs.block / kKBlock, blocks_per_group = op.group_size / inputs.block;
  const int64_t columns = inputs.row_tiles * kTileRows, row_tile_bytes = k_blocks * kTileBytes;
  scratch.sums.resize(static_cast<size_t>(passes * kPairOutputs * columns));
  alignas(64) int32_t tile_sums[4][kStripe][kTileRows];
  for (int64_t rt = 0; rt < inputs.row_tiles; rt += 2) {
    const int8_t* b0 = inputs.quads.data() + rt * row_tile_bytes;
    const int8_t* b1 = b0 + row_tile_bytes;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t g = b / blocks_per_group;
      const bool group_starts = b % blocks_per_group == 0;
      for (int64_t pass = 0; pass < passes; ++pass) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = b * k_per_block; kb < (b + 1) * k_per_block; ++kb) {
          _tile_loadd(4, CodeTile(scratch, k_blocks, pass, kb, 0), 64);
          _tile_loadd(5, CodeTile(scratch, k_blocks, pass, kb, 1), 64);
          _tile_loadd(6, b0 + kb * kTileBytes, 64);
          _tile_loadd(7, b1 + kb * kTileBytes, 64);
          if constexpr (Signed8) {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
          } else {
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
          }
        }
        _tile_stored(0, tile_sums[0], 64);
        _tile_stored(1, tile_sums[1], 64);
        _tile_stored(2, tile_sums[2], 64);
        _tile_stored(3, tile_sums[3], 64);
        for (int t = 0; t < 4; ++t) {
          const int64_t stripe = t / 2, row_tile = rt + t % 2;
          const __m512 d = _mm512_loadu_ps(inputs.scales.data() + (row_tile * blocks + b) * kTileRows);
          const __m512 group_sums = _mm512_loadu_ps(
              inputs.group_sums.data() + (row_tile * op.groups + g) * kTileRows);
          for (int64_t m = 0; m < kStripe; ++m) {
            const int64_t o = pass * kPairOutputs + stripe * kStripe + m;
            float* acc = scratch.sums.data() + o * columns + row_tile * kTileRows;
            const size_t block = static_cast<size_t>(o * op.groups + g);
            __m512 sum = b == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc);
            const __m512 sd = _mm512_mul_ps(_mm512_set1_ps(scratch.scales[block]), d);
            sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile_sums[t][m])), sd, sum);
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

// Each row tile's k-blocks as B tiles: the 16 rows' 64 codes (16 quads each) transposed so that
// tile row k holds quad k of every row. Rows past op.rows are zeros.
__attribute__((target("avx512f"))) void ArrangeQuads(const QuantOperands& op,
                                                     const Int8Activations& codes,
                                                     Int8ActivationTileInputs* inputs) {
  const int64_t k_blocks = op.in / kKBlock;
  for (int64_t t = 0; t < inputs->row_tiles; ++t) {
    const int64_t valid = std::clamp<int64_t>(op.rows - t * kTileRows, 0, kTileRows);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      __m512 rows[16];
      for (int64_t i = 0; i < 16; ++i) {
        rows[i] = i < valid ? _mm512_loadu_ps(codes.codes.data() + (t * kTileRows + i) * op.in +
                                              kb * kKBlock)
                            : _mm512_setzero_ps();
      }
      Transpose16x16(rows);
      int8_t* tile = inputs->quads.data() + (t * k_blocks + kb) * kTileBytes;
      for (int64_t k = 0; k < 16; ++k) _mm512_storeu_ps(tile + k * 64, rows[k]);
    }
  }
}

}  // namespace

bool Int8ActivationTilesRun() {
  static const bool runs = [] {
    const char* choice = std::getenv("PLACER_INT8_ACTIVATION_TILES");
    if (choice != nullptr && std::strcmp(choice, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("amx-int8") &&
           DetectInt8ActivationIsa() == Int8ActivationIsa::kAvx512Vnni && AmxTilesUsable();
  }();
  return runs;
}

bool Int8ActivationTilesApply(const loader::PackedLayout& layout) {
  return Int8ActivationKernelApplies(layout) && ActivationBlock(layout) % kKBlock == 0;
}

Int8ActivationTileInputs& Int8ActivationTileInputsBuffer() {
  thread_local Int8ActivationTileInputs inputs;
  constexpr size_t kKeptBytes = size_t{1} << 22;
  if (inputs.quads.capacity() > kKeptBytes) inputs = Int8ActivationTileInputs();
  return inputs;
}

void ArrangeInt8ActivationTileInputs(const QuantOperands& op, Int8ActivationTileInputs* inputs) {
  thread_local Int8Activations codes;
  inputs->block = ActivationBlock(loader::PackedLayout{op.bits, op.out, op.in, op.group_size});
  QuantizeActivations(op, inputs->block, &codes, Int8ActivationIsa::kAvx512Vnni);
  const int64_t blocks = op.in / inputs->block;
  int64_t row_tiles = (op.rows + kTileRows - 1) / kTileRows;
  row_tiles += row_tiles % 2;
  inputs->row_tiles = row_tiles;
  inputs->quads.resize(static_cast<size_t>(row_tiles * op.in * kTileRows));
  inputs->scales.assign(static_cast<size_t>(row_tiles * blocks * kTileRows), 0.0f);
  inputs->group_sums.assign(static_cast<size_t>(row_tiles * op.groups * kTileRows), 0.0f);
  for (int64_t r = 0; r < op.rows; ++r) {
    const int64_t tile = r / kTileRows, lane = r % kTileRows;
    for (int64_t b = 0; b < blocks; ++b) {
      inputs->scales[static_cast<size_t>((tile * blocks + b) * kTileRows + lane)] =
          codes.scales[static_cast<size_t>(r * blocks + b)];
    }
    for (int64_t g = 0; g < op.groups; ++g) {
      inputs->group_sums[static_cast<size_t>((tile * op.groups + g) * kTileRows + lane)] =
          op.x_group_sums[r * op.groups + g];
    }
  }
  ArrangeQuads(op, codes, inputs);
  if (codes.codes.capacity() > (size_t{1} << 22)) codes = Int8Activations();
}

void QuantizedChunkRowsInt8ActivationTiles(const QuantOperands& op,
                                           const Int8ActivationTileInputs& inputs, int64_t n0,
                                           int64_t n1) {
  CodeTiles& scratch = ThreadCodeTiles();
  ConfigureSquareTiles();
  for (int64_t s0 = n0; s0 < n1; s0 += kMostCodeOutputs) {
    const int64_t count = std::min(kMostCodeOutputs, n1 - s0);
    const int64_t passes = LayOutCodeTiles(op, s0, count, NibbleOrder::kVnni, scratch);
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
