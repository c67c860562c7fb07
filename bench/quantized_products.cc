#include "bench/quantized_products.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/quantized_weight.h"
#include "model/quantized_linear.h"
#include "model/small_batch_bf16.h"

namespace placer::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MedianMilliseconds(const std::function<void()>& pass, int runs) {
  pass();  // warm
  std::vector<double> times;
  for (int run = 0; run < runs; ++run) {
    const Clock::time_point start = Clock::now();
    pass();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Scheme {
  const char* name;
  int bits;
  int64_t group_size;  // 0: per output channel
};

}  // namespace

nlohmann::json MeasureQuantizedProducts(int runs) {
  const std::vector<model::QuantIsa> isas = model::RunnableQuantIsas();
  if (isas.empty()) throw std::runtime_error("quantized-products: this CPU has neither AVX2 nor AVX-512");
  at::manual_seed(1);
  std::vector<at::Tensor> bf16;
  for (int layer = 0; layer < 8; ++layer) {
    for (auto [out, in] : {std::pair<int64_t, int64_t>{768, 768}, {256, 768}, {256, 768},
                           {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}}) {
      bf16.push_back((at::randn({out, in}) * 0.02).to(at::kBFloat16));
    }
  }
  const std::vector<Scheme> schemes = {{"int8", 8, 0}, {"int4_g32", 4, 32}, {"int4_g128", 4, 128}};
  std::vector<std::vector<at::Tensor>> packed(schemes.size());
  nlohmann::json bytes = {{"bf16", 0}};
  for (const at::Tensor& w : bf16) bytes["bf16"] = bytes["bf16"].get<int64_t>() + w.nbytes();
  for (size_t s = 0; s < schemes.size(); ++s) {
    int64_t total = 0;
    for (const at::Tensor& w : bf16) {
      const loader::PackedLayout layout{schemes[s].bits, w.size(0), w.size(1),
                                        schemes[s].group_size == 0 ? w.size(1) : schemes[s].group_size};
      packed[s].push_back(*loader::QuantizeLinearWeight(w, layout, "bench"));
      total += packed[s].back().nbytes();
    }
    bytes[schemes[s].name] = total;
  }
  nlohmann::json points = nlohmann::json::array();
  for (int64_t rows : {1, 2, 4, 8, 16, 32}) {
    std::vector<at::Tensor> inputs;
    for (const at::Tensor& w : bf16) inputs.push_back(at::randn({rows, w.size(1)}).to(at::kBFloat16));
    const auto each = [&](const std::function<void(size_t)>& product) {
      return [&, product] {
        for (size_t i = 0; i < bf16.size(); ++i) product(i);
      };
    };
    nlohmann::json point = {{"rows", rows}};
    point["bf16_ms"] = {
        {"aten", MedianMilliseconds(each([&](size_t i) { at::linear(inputs[i], bf16[i]); }), runs)},
        {"placer", MedianMilliseconds(each([&](size_t i) {
           model::SmallBatchLinearBf16(inputs[i], bf16[i], {}, model::DetectBf16Isa());
         }), runs)}};
    for (size_t s = 0; s < schemes.size(); ++s) {
      nlohmann::json ways;
      for (model::QuantIsa isa : isas) {
        ways[model::QuantIsaName(isa)] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearKernel(inputs[i], packed[s][i], {}, isa);
        }), runs);
      }
      at::Tensor scratch;
      ways["dequantize_gemm"] = MedianMilliseconds(each([&](size_t i) {
        at::linear(inputs[i], loader::DequantizeLinearWeight(packed[s][i], at::kBFloat16, &scratch));
      }), runs);
      point[std::string(schemes[s].name) + "_ms"] = ways;
    }
    points.push_back(point);
  }
  nlohmann::json isa_names = nlohmann::json::array();
  for (model::QuantIsa isa : isas) isa_names.push_back(model::QuantIsaName(isa));
  return {{"isas", isa_names},
          {"bf16_isa", model::Bf16IsaName(model::DetectBf16Isa())},
          {"max_rows", model::QuantizedLinearMaxRows(model::DetectQuantIsa())},
          {"threads", at::get_num_threads()},
          {"bytes_per_pass", bytes},
          {"runs", runs},
          {"points", points}};
}

}  // namespace placer::bench
