#include "bench/packed_stream.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/memory_bandwidth.h"
#include "loader/huge_page_tensor.h"
#include "loader/quantized_weight.h"
#include "model/quantized_linear.h"

namespace placer::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Scheme {
  const char* name;
  int bits;
  int64_t group_size;  // 0: one group per output channel, as --quantize int8
  bool int8_activations;
};

using Shapes = std::vector<std::pair<int64_t, int64_t>>;

// [out, in] of the linears of one "layer" of each PackedStreamShapes.
const Shapes& ShapesOf(PackedStreamShapes shapes) {
  // TinyLlama's q, k, v, o, gate, up, down.
  static const Shapes tinyllama = {{2048, 2048}, {256, 2048}, {256, 2048}, {2048, 2048},
                                   {5632, 2048}, {5632, 2048}, {2048, 5632}};
  // The small preset's (bench/run's llama-small).
  static const Shapes small = {{768, 768},   {256, 768},   {256, 768}, {768, 768},
                               {2048, 768}, {2048, 768}, {768, 2048}};
  static const Shapes small_lm_head = {{32000, 768}};
  switch (shapes) {
    case PackedStreamShapes::kSmall: return small;
    case PackedStreamShapes::kSmallLmHead: return small_lm_head;
    default: return tinyllama;
  }
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

// Whole layers of packed weights until they reach `bytes`; their bytes in *total.
std::vector<at::Tensor> PackedLayers(const Scheme& scheme, const Shapes& shapes, int64_t bytes,
                                     int64_t* total) {
  std::vector<at::Tensor> packed;
  *total = 0;
  while (*total < bytes) {
    for (const auto& [out, in] : shapes) {
      const at::Tensor w = (at::randn({out, in}) * 0.02).to(at::kBFloat16);
      const loader::PackedLayout layout{scheme.bits, out, in,
                                        scheme.group_size == 0 ? in : scheme.group_size};
      absl::StatusOr<at::Tensor> quantized = loader::QuantizeLinearWeight(w, layout, "bench");
      if (!quantized.ok()) throw std::runtime_error(std::string(quantized.status().message()));
      // Where the weight reader puts a cpu-placed packed weight: in 2 MiB pages at any size.
      packed.push_back(loader::InHugePageArena(*quantized));
      *total += packed.back().nbytes();
    }
  }
  return packed;
}

}  // namespace

const char* PackedStreamShapesName(PackedStreamShapes shapes) {
  switch (shapes) {
    case PackedStreamShapes::kSmall: return "small";
    case PackedStreamShapes::kSmallLmHead: return "small-lm-head";
    default: return "tinyllama";
  }
}

nlohmann::json MeasurePackedStream(int64_t bytes, int passes, PackedStreamShapes shapes,
                                   bool float32_rows) {
  at::manual_seed(1);
  const bool mode_before = model::Int8ActivationsEnabled();
  nlohmann::json schemes;
  for (const Scheme& scheme : {Scheme{"int4", 4, 128, false}, Scheme{"int4a8", 4, 128, true},
                               Scheme{"int8", 8, 0, false}, Scheme{"int8a8", 8, 0, true}}) {
    int64_t total = 0;
    const std::vector<at::Tensor> weights = PackedLayers(scheme, ShapesOf(shapes), bytes, &total);
    // One input row per width, in the rows' dtype.
    std::map<int64_t, at::Tensor> rows;
    std::vector<const at::Tensor*> inputs;  // each weight's row
    for (const at::Tensor& w : weights) {
      const int64_t in = loader::PackedLayoutOf(w)->in;
      at::Tensor& row = rows[in];
      if (!row.defined()) row = at::randn({1, in}).to(float32_rows ? at::kFloat : at::kBFloat16);
      inputs.push_back(&row);
    }
    if (!model::QuantizedLinearApplies(*inputs.front(), weights.front(), at::Tensor())) continue;
    model::SetInt8Activations(scheme.int8_activations);
    if (scheme.int8_activations && !model::UsesInt8Activations(weights.front())) continue;
    ReadProbe read(total);
    const auto pass = [&] {
      const Clock::time_point start = Clock::now();
      for (size_t i = 0; i < weights.size(); ++i) {
        model::QuantizedLinear(*inputs[i], weights[i], at::Tensor());
      }
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    pass();  // warm: the helpers, the per-thread buffers
    std::vector<double> pass_seconds, read_bps, of_read;
    for (int p = 0; p < passes; ++p) {
      pass_seconds.push_back(pass());
      read_bps.push_back(read.BytesPerSecond());
      of_read.push_back(static_cast<double>(total) / read_bps.back() / pass_seconds.back());
    }
    const double pass_median = Quantile(pass_seconds, 0.5);
    schemes[scheme.name] = {
        {"bytes", total},
        {"pass_ms", pass_median * 1e3},
        {"kernel_gbps", static_cast<double>(total) / pass_median / 1e9},
        {"read_gbps", Quantile(read_bps, 0.5) / 1e9},
        {"of_read",
         {{"p25", Quantile(of_read, 0.25)}, {"median", Quantile(of_read, 0.5)},
          {"p75", Quantile(of_read, 0.75)}}}};
  }
  model::SetInt8Activations(mode_before);
  return {{"threads", at::get_num_threads()}, {"passes", passes},
          {"shapes", PackedStreamShapesName(shapes)},
          {"rows", float32_rows ? "F32" : "BF16"}, {"schemes", schemes}};
}

}  // namespace placer::bench
