#include "bench/small_batch_products.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/openblas_core.h"
#include "model/causal_lm.h"
#include "model/prompt_chunk_linear.h"
#include "model/bf16_pairs.h"
#include "model/bf16_tiles.h"
#include "model/prompt_chunk_bf16.h"
#include "model/small_batch_bf16.h"
#include "model/small_batch_linear.h"

namespace placer::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One `small` step's products: [out, in] per decoder layer (q, k, v, o, gate, up, down) x 8,
// then the lm_head.
std::vector<std::pair<int64_t, int64_t>> SmallPresetShapes() {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int layer = 0; layer < 8; ++layer) {
    for (auto shape : {std::pair<int64_t, int64_t>{768, 768}, {256, 768}, {256, 768}, {768, 768},
                       {2048, 768}, {2048, 768}, {768, 2048}}) {
      shapes.push_back(shape);
    }
  }
  shapes.push_back({32000, 768});
  return shapes;
}

double MedianMilliseconds(const std::function<void()>& pass, int runs) {
  pass();  // warm: first-touch faults and lazy initialisation are not the product
  std::vector<double> times;
  for (int run = 0; run < runs; ++run) {
    const Clock::time_point start = Clock::now();
    pass();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Beyond this one gemv per row is many times slower than either other way: not measured.
constexpr int64_t kMostGemvRows = 64;

}  // namespace

nlohmann::json MeasureSmallBatchProducts(int runs, bool force_avx2,
                                         const std::vector<int64_t>& row_counts) {
  model::VectorIsa isa = model::DetectVectorIsa();
  if (isa == model::VectorIsa::kNone) {
    throw std::runtime_error("products: this CPU has neither AVX2 nor AVX-512");
  }
  if (force_avx2) isa = model::VectorIsa::kAvx2;
  at::manual_seed(1);
  std::vector<at::Tensor> out_in, in_out;
  int64_t bytes = 0;
  for (const auto& [out, in] : SmallPresetShapes()) {
    out_in.push_back(at::randn({out, in}) * 0.02);
    in_out.push_back(at::randn({in, out}) * 0.02);
    bytes += out * in * static_cast<int64_t>(sizeof(float));
  }
  nlohmann::json points = nlohmann::json::array();
  for (const int64_t rows : row_counts) {
    std::vector<at::Tensor> inputs;
    for (const at::Tensor& w : out_in) inputs.push_back(at::randn({rows, w.size(1)}));
    const auto each = [&](const std::function<void(size_t)>& product) {
      return [&, product] {
        for (size_t i = 0; i < out_in.size(); ++i) product(i);
      };
    };
    nlohmann::json point = {{"rows", rows}};
    point["out_in_ms"] = {
        {"placer", MedianMilliseconds(each([&](size_t i) {
           model::SmallBatchLinear(inputs[i], out_in[i], {}, isa);
         }), runs)},
        {"sgemm", MedianMilliseconds(each([&](size_t i) { at::linear(inputs[i], out_in[i]); }), runs)}};
    if (model::PromptChunkLinearRuns() && !force_avx2) {
      point["out_in_ms"]["prompt_chunk"] = MedianMilliseconds(each([&](size_t i) {
        model::PromptChunkLinear(inputs[i], out_in[i], {});
      }), runs);
    }
    if (rows <= kMostGemvRows) {
      point["out_in_ms"]["gemv_per_row"] = MedianMilliseconds(each([&](size_t i) {
        for (int64_t r = 0; r < rows; ++r) at::mv(out_in[i], inputs[i][r]);
      }), runs);
    }
    point["in_out_ms"] = {
        {"placer", MedianMilliseconds(each([&](size_t i) {
           model::SmallBatchLinear(inputs[i], in_out[i], {}, isa, model::WeightLayout::kInOut);
         }), runs)},
        {"sgemm", MedianMilliseconds(each([&](size_t i) { at::mm(inputs[i], in_out[i]); }), runs)}};
    // The same products over BF16 weights (a BF16 checkpoint): each BF16 kernel this CPU
    // runs against ATen's BF16 linear (oneDNN), which prompt chunks use where it is vectorized
    // (elsewhere it is a scalar loop, not timed: AtenBf16GemmIsVectorized).
    std::vector<at::Tensor> weights_bf16, inputs_bf16;
    for (size_t i = 0; i < out_in.size() && !force_avx2; ++i) {
      weights_bf16.push_back(out_in[i].to(at::kBFloat16));
      inputs_bf16.push_back(inputs[i].to(at::kBFloat16));
    }
    if (force_avx2) {  // the float32 AVX2 kernels only
      points.push_back(point);
      continue;
    }
    point["bf16_out_in_ms"] = nlohmann::json::object();
    if (model::AtenBf16GemmIsVectorized()) {
      point["bf16_out_in_ms"]["aten"] = MedianMilliseconds(each([&](size_t i) {
        at::linear(inputs_bf16[i], weights_bf16[i]);
      }), runs);
    }
    for (model::Bf16Isa bf16 : model::RunnableBf16Isas()) {
      point["bf16_out_in_ms"][model::Bf16IsaName(bf16)] = MedianMilliseconds(each([&](size_t i) {
        model::SmallBatchLinearBf16(inputs_bf16[i], weights_bf16[i], {}, bf16);
      }), runs);
    }
    if (model::PromptChunkBf16Runs()) {
      point["bf16_out_in_ms"]["prompt_chunk"] = MedianMilliseconds(each([&](size_t i) {
        model::PromptChunkLinearBf16(inputs_bf16[i], weights_bf16[i], {});
      }), runs);
    }
    if (model::Bf16PairsRun()) {  // the same weights in pair order (model/bf16_pairs.h)
      std::vector<at::Tensor> pairs;
      for (const at::Tensor& w : weights_bf16) pairs.push_back(model::PackBf16Pairs(w));
      point["bf16_out_in_ms"]["pairs"] = MedianMilliseconds(each([&](size_t i) {
        model::Bf16PairLinear(inputs_bf16[i], pairs[i], {});
      }), runs);
    }
    if (model::Bf16TilesRun()) {  // the same weights in AMX tile order (model/bf16_tiles.h)
      std::vector<at::Tensor> tiles;
      for (const at::Tensor& w : weights_bf16) tiles.push_back(model::PackBf16Tiles(w));
      // As served (a decode step's rows on the vectors, bf16_tile_rows.h), and on the tiles.
      point["bf16_out_in_ms"]["amx_tiles"] = MedianMilliseconds(each([&](size_t i) {
        model::Bf16TileLinear(inputs_bf16[i], tiles[i], {});
      }), runs);
      point["bf16_out_in_ms"]["amx_tiles_on_tiles"] = MedianMilliseconds(each([&](size_t i) {
        model::Bf16TileLinearOnTiles(inputs_bf16[i], tiles[i], {});
      }), runs);
    }
    points.push_back(point);
  }
  return {{"isa", isa == model::VectorIsa::kAvx512 ? "avx512" : "avx2"},
          {"bf16_isa", model::Bf16IsaName(model::DetectBf16Isa())},
          {"bf16_max_rows", model::SmallBatchBf16MaxRows(model::DetectBf16Isa())},
          {"aten_bf16_gemm_vectorized", model::AtenBf16GemmIsVectorized()},
          {"bf16_isas", [&] {
             nlohmann::json names = nlohmann::json::array();
             if (!force_avx2) {
               for (model::Bf16Isa bf16 : model::RunnableBf16Isas()) names.push_back(model::Bf16IsaName(bf16));
             }
             return names;
           }()},
          {"blas", model::BlasLibraryInUse()},
          {"openblas_core", base::OpenBlasCoreName()},
          {"placer_max_rows",
           {{"out_in", model::SmallBatchLinearMaxRows(isa, model::WeightLayout::kOutIn)},
            {"in_out", model::SmallBatchLinearMaxRows(isa, model::WeightLayout::kInOut)}}},
          {"threads", at::get_num_threads()},
          {"weight_bytes_per_pass", bytes},
          {"runs", runs},
          {"points", points}};
}

}  // namespace placer::bench
