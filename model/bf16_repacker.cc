#include "model/bf16_repacker.h"

#include "model/bf16_pairs.h"
#include "model/bf16_tiles.h"

namespace placer::model {
namespace {

// Packs the [out, in] BF16 linear weights whose shape `fits`; leaves every other slot as bound.
runtime::WeightRepacker LinearRepacker(bool (*fits)(int64_t out, int64_t in),
                                       at::Tensor (*pack)(const at::Tensor& weight)) {
  return [fits, pack](const runtime::BlockTensor& slot, const at::Tensor& weight) {
    const bool out_in = slot.linear == loader::LinearWeight::kOutIn || slot.lm_head;
    if (!out_in || weight.scalar_type() != at::kBFloat16 || weight.dim() != 2 ||
        !weight.is_contiguous() || !fits(weight.size(0), weight.size(1))) {
      return at::Tensor();
    }
    return pack(weight);
  };
}

}  // namespace

runtime::WeightRepacker Bf16TileRepacker(at::ScalarType compute) {
  if (compute != at::kBFloat16 || !Bf16TilesRun()) return nullptr;
  return LinearRepacker(&Bf16TileShapeFits, &PackBf16Tiles);
}

runtime::WeightRepacker Bf16PairRepacker(at::ScalarType compute) {
  if (compute != at::kBFloat16 || !Bf16PairsRun()) return nullptr;
  return LinearRepacker(&Bf16PairShapeFits, &PackBf16Pairs);
}

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
