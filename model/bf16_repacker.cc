#include "model/bf16_repacker.h"

#include "model/bf16_pairs.h"
#include "model/bf16_tiles.h"

namespace placer::model {

runtime::WeightRepacker Bf16WeightRepacker(at::ScalarType compute) {
  if (runtime::WeightRepacker tiles = Bf16TileRepacker(compute)) return tiles;
  return Bf16PairRepacker(compute);
}

std::string Bf16WeightLayoutNote() {
  if (Bf16TilesRun()) {
    return "BF16 kernels: AMX tiles; the linear weights of layers held in host memory are "
           "re-laid out into tile order on each layer's first call (PLACER_BF16_TILES=0: "
           "vector kernels on the weights as mapped)";
  }
  if (Bf16PairsRun()) {
    return "BF16 kernels: AVX512-BF16 on pair order; the linear weights of layers held in host "
           "memory are re-laid out on each layer's first call (PLACER_BF16_PAIRS=0: vector "
           "kernels on the weights as mapped)";
  }
  return "";
}

}  // namespace placer::model
