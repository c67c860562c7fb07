#include "model/bf16_tiles.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "loader/huge_page_tensor.h"
#include "model/amx_tiles.h"
#include "model/bf16_tile_rows.h"
#include "model/spinning_workers.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

constexpr int64_t kStripe = 16;           // outputs per tile
constexpr int64_t kKBlock = 32;           // inputs per tile
constexpr int64_t kBlockValues = kStripe * kKBlock;
constexpr int64_t kGroupStripes = 4;      // stripes a task accumulates at once (4 C tiles)
constexpr int64_t kRowsPerPass = 16;      // input rows per B tile

int64_t GroupStripes(int64_t stripes, int64_t group) {
  return std::min(kGroupStripes, stripes - group * kGroupStripes);
}

void RunParallel(int64_t tasks, const SpinningWorkers::RangeFn& fn) {
  if (!SpinningWorkers::Shared().TryRun(tasks, fn)) at::parallel_for(0, tasks, 1, fn);
}

// Where block (stripe, k_block) starts, in values (the order bf16_tiles.h states).
int64_t BlockOffset(int64_t stripes, int64_t k_blocks, int64_t stripe, int64_t k_block) {
  const int64_t group = stripe / kGroupStripes;
  return (group * kGroupStripes * k_blocks +
          k_block * GroupStripes(stripes, group) + stripe % kGroupStripes) * kBlockValues;
}

// Tiles (ConfigureSquareTiles) 0-3: sums, 16 outputs x 16 rows (float32); 4: the rows' inputs,
// 16 pairs of inputs x 16 rows; 5-7: weights, 16 outputs x 32 inputs.
struct TileOperands {
  const uint32_t* pairs;   // [in / 2][16]: inputs 2k, 2k+1 of row r at [k][r]; zeros past rows
  const uint16_t* tiles;   // the weight in tile order
  const float* bias;       // [out] or null
  uint16_t* y;             // [rows, out] BF16 bits
  int64_t rows, in, out;   // rows <= 16
};

// Adds the bias, rounds to BF16 (to nearest even, as ATen) and scatters a stripe's sums.
void StoreStripe(const TileOperands& op, const float (&sums)[16][16], int64_t stripe) {
  for (int64_t m = 0; m < kStripe; ++m) {
    const int64_t output = stripe * kStripe + m;
    const float bias = op.bias != nullptr ? op.bias[output] : 0.0f;
    for (int64_t r = 0; r < op.rows; ++r) {
      op.y[r * op.out + output] = at::BFloat16(sums[m][r] + bias).x;
    }
  }
}

// A group of 4 stripes: the k-blocks of the group are one contiguous stream; three weight tiles
// rotate so a load never waits for the product reading the tile before it.
__attribute__((target("amx-tile,amx-bf16"))) void FourStripes(const TileOperands& op,
                                                               int64_t group) {
  const int64_t k_blocks = op.in / kKBlock;
  const uint16_t* w = op.tiles + group * kGroupStripes * k_blocks * kBlockValues;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t kb = 0; kb < k_blocks; ++kb, w += kGroupStripes * kBlockValues) {
    _tile_loadd(4, op.pairs + kb * kKBlock / 2 * kRowsPerPass, 64);
    _tile_loadd(5, w, 64);
    _tile_loadd(6, w + kBlockValues, 64);
    _tile_dpbf16ps(0, 5, 4);
    _tile_loadd(7, w + 2 * kBlockValues, 64);
    _tile_dpbf16ps(1, 6, 4);
    _tile_loadd(5, w + 3 * kBlockValues, 64);
    _tile_dpbf16ps(2, 7, 4);
    _tile_dpbf16ps(3, 5, 4);
  }
  alignas(64) float sums[4][16][16];  // [stripe][output][row]
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(2, sums[2], 64);
  _tile_stored(3, sums[3], 64);
  for (int64_t s = 0; s < kGroupStripes; ++s) StoreStripe(op, sums[s], group * kGroupStripes + s);
}

// The last group's stripes when it holds fewer than 4, one at a time.
__attribute__((target("amx-tile,amx-bf16"))) void OneStripe(const TileOperands& op,
                                                             int64_t stripe) {
  const int64_t stripes = op.out / kStripe, k_blocks = op.in / kKBlock;
  const int64_t group_stripes = GroupStripes(stripes, stripe / kGroupStripes);
  const uint16_t* w = op.tiles + BlockOffset(stripes, k_blocks, stripe, 0);
  _tile_zero(0);
  for (int64_t kb = 0; kb < k_blocks; ++kb, w += group_stripes * kBlockValues) {
    _tile_loadd(4, op.pairs + kb * kKBlock / 2 * kRowsPerPass, 64);
    _tile_loadd(5, w, 64);
    _tile_dpbf16ps(0, 5, 4);
  }
  alignas(64) float sums[16][16];
  _tile_stored(0, sums, 64);
  StoreStripe(op, sums, stripe);
}

void Groups(const TileOperands& op, int64_t begin, int64_t end) {
  const int64_t stripes = op.out / kStripe;
  ConfigureSquareTiles();
  for (int64_t group = begin; group < end; ++group) {
    if (GroupStripes(stripes, group) == kGroupStripes) {
      FourStripes(op, group);
    } else {
      for (int64_t s = group * kGroupStripes; s < stripes; ++s) OneStripe(op, s);
    }
  }
  // Leaves the tiles in their initial state: a context switch then saves none of their 8 KiB.
  ReleaseTiles();
}

// Rows [0, rows) of x (rows <= 16) as the B tiles want them.
void PairRows(const uint16_t* x, int64_t rows, int64_t in, base::CacheLineVector<uint32_t>& pairs) {
  const int64_t k_pairs = in / 2;
  pairs.assign(static_cast<size_t>(k_pairs * kRowsPerPass), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = x + r * in;
    uint32_t* to = pairs.data() + r;
    for (int64_t k = 0; k < k_pairs; ++k) {
      uint32_t pair;
      std::memcpy(&pair, row + 2 * k, sizeof(pair));
      to[k * kRowsPerPass] = pair;
    }
  }
}


// Unpacks into `weight`, resized to [out, in] (a buffer reused between calls).
void UnpackBf16TilesInto(const at::Tensor& tiles, at::Tensor& weight) {
  TORCH_CHECK(IsBf16TileWeight(tiles), "UnpackBf16Tiles: not a weight in tile order: ",
              tiles.scalar_type(), " ", tiles.sizes());
  const int64_t stripes = tiles.size(0), k_blocks = tiles.size(1);
  const int64_t out = stripes * kStripe, in = k_blocks * kKBlock;
  if (!weight.defined()) weight = at::empty({0}, tiles.options());
  weight.resize_({out, in});
  const auto* from = reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>());
  auto* to = reinterpret_cast<uint16_t*>(weight.data_ptr<at::BFloat16>());
  RunParallel(stripes, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const uint16_t* block = from + BlockOffset(stripes, k_blocks, s, kb);
        for (int64_t m = 0; m < kStripe; ++m) {
          std::memcpy(to + (s * kStripe + m) * in + kb * kKBlock, block + m * kKBlock,
                      kKBlock * sizeof(uint16_t));
        }
      }
    }
  });
}

}  // namespace

bool Bf16TilesRun() {
  static const bool runs = [] {
    const char* choice = std::getenv("PLACER_BF16_TILES");
    if (choice != nullptr && std::strcmp(choice, "0") == 0) return false;
    return AmxTilesUsable();
  }();
  return runs;
}

bool IsBf16TileWeight(const at::Tensor& tensor) {
  return tensor.defined() && tensor.device().is_cpu() && tensor.layout() == at::kStrided &&
         tensor.scalar_type() == at::kBFloat16 && tensor.dim() == 4 &&
         tensor.size(2) == kStripe && tensor.size(3) == kKBlock && tensor.size(0) > 0 &&
         tensor.size(1) > 0 && tensor.is_contiguous();
}

at::Tensor PackBf16Tiles(const at::Tensor& weight) {
  TORCH_CHECK(weight.device().is_cpu() && weight.scalar_type() == at::kBFloat16 &&
                  weight.dim() == 2 && weight.is_contiguous() &&
                  Bf16TileShapeFits(weight.size(0), weight.size(1)),
              "PackBf16Tiles: wants a contiguous BF16 [out, in] CPU weight with out a multiple "
              "of 16 and in of 32, got ", weight.scalar_type(), " ", weight.sizes());
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t stripes = out / kStripe, k_blocks = in / kKBlock;
  at::Tensor tiles = loader::HugePageZeros({stripes, k_blocks, kStripe, kKBlock}, at::kBFloat16);
  const auto* from = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  auto* to = reinterpret_cast<uint16_t*>(tiles.data_ptr<at::BFloat16>());
  RunParallel(stripes, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        uint16_t* block = to + BlockOffset(stripes, k_blocks, s, kb);
        for (int64_t m = 0; m < kStripe; ++m) {
          std::memcpy(block + m * kKBlock, from + (s * kStripe + m) * in + kb * kKBlock,
                      kKBlock * sizeof(uint16_t));
        }
      }
    }
  });
  return tiles;
}

at::Tensor UnpackBf16Tiles(const at::Tensor& tiles) {
  at::Tensor weight;
  UnpackBf16TilesInto(tiles, weight);
  return weight;
}

namespace {

// Bf16TileLinear, with `vector_rows` the rows up to which the vector kernel takes them.
at::Tensor TileLinear(const at::Tensor& x, const at::Tensor& tiles, const at::Tensor& bias,
                      int64_t vector_rows) {
  TORCH_CHECK(Bf16TilesRun(), "Bf16TileLinear: this CPU or process cannot use AMX tiles");
  TORCH_CHECK(IsBf16TileWeight(tiles), "Bf16TileLinear: the weight is not in tile order: ",
              tiles.scalar_type(), " ", tiles.sizes());
  const int64_t out = tiles.size(0) * kStripe, in = tiles.size(1) * kKBlock;
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kBFloat16 && x.dim() >= 1 &&
                  x.size(-1) == in,
              "Bf16TileLinear: the input must be BF16 [..., ", in, "] on the CPU, got ",
              x.scalar_type(), " ", x.sizes());
  TORCH_CHECK(!bias.defined() || (bias.device().is_cpu() && bias.dim() == 1 &&
                                  bias.size(0) == out &&
                                  (bias.scalar_type() == at::kFloat ||
                                   bias.scalar_type() == at::kBFloat16)),
              "Bf16TileLinear: the bias must be float32 or BF16 [", out, "]");
  const at::Tensor flat = x.contiguous();
  const int64_t rows = flat.numel() / in;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  at::Tensor y = at::empty(shape, flat.options());
  if (rows == 0) return y;
  if (rows > kMostTileRows) {
    // A long prompt chunk: ATen's BF16 GEMM (oneDNN) over the weight unpacked into a buffer
    // kept for the next call reuses each weight across far more rows than 16 at a time.
    thread_local at::Tensor unpacked;
    UnpackBf16TilesInto(tiles, unpacked);
    return bias.defined() ? at::linear(flat, unpacked, bias.to(at::kBFloat16)).view(shape)
                          : at::linear(flat, unpacked).view(shape);
  }
  const at::Tensor bias32 = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  const auto* inputs = reinterpret_cast<const uint16_t*>(flat.data_ptr<at::BFloat16>());
  auto* outputs = reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>());
  const int64_t groups = (out / kStripe + kGroupStripes - 1) / kGroupStripes;
  if (rows <= vector_rows && Bf16TileRowsRun()) {
    const Bf16TileRowsOperands op{inputs,
                                  reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>()),
                                  bias32.defined() ? bias32.data_ptr<float>() : nullptr, outputs,
                                  rows, in, out};
    RunParallel(groups, [&](int64_t begin, int64_t end) { Bf16TileRowsOfGroups(op, begin, end); });
    return y;
  }
  thread_local base::CacheLineVector<uint32_t> pairs;
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPass) {
    const int64_t count = std::min(kRowsPerPass, rows - r0);
    PairRows(inputs + r0 * in, count, in, pairs);
    const TileOperands op{pairs.data(),
                          reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>()),
                          bias32.defined() ? bias32.data_ptr<float>() : nullptr,
                          outputs + r0 * out, count, in, out};
    RunParallel(groups, [&](int64_t begin, int64_t end) { Groups(op, begin, end); });
  }
  return y;
}

}  // namespace

at::Tensor Bf16TileLinear(const at::Tensor& x, const at::Tensor& tiles, const at::Tensor& bias) {
  return TileLinear(x, tiles, bias, kMostTileVectorRows);
}

at::Tensor Bf16TileLinearOnTiles(const at::Tensor& x, const at::Tensor& tiles,
                                 const at::Tensor& bias) {
  return TileLinear(x, tiles, bias, 0);
}

}  // namespace placer::model
