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
#include "model/int8_activation_tiles.h"
#include "model/prompt_chunk_bf16.h"
#include "model/quantized_int4_digits_avx2.h"
#include "model/quantized_linear.h"
#include "model/quantized_unpacked_linear.h"
#include "model/quantized_vnni.h"
#include "model/small_batch_bf16.h"
#include "model/tensor_ops.h"
#include "model/widened_bf16_linear.h"

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

nlohmann::json MeasureQuantizedProducts(int runs, const std::vector<int64_t>& row_counts,
                                        const std::vector<std::string>& only) {
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
  std::vector<Scheme> schemes;
  for (const Scheme& scheme : {Scheme{"int8", 8, 0}, Scheme{"int4_g32", 4, 32},
                               Scheme{"int4_g64", 4, 64}, Scheme{"int4_g128", 4, 128}}) {
    if (only.empty() || std::find(only.begin(), only.end(), scheme.name) != only.end()) {
      schemes.push_back(scheme);
    }
  }
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
  for (int64_t rows : row_counts) {
    std::vector<at::Tensor> inputs;
    std::vector<at::Tensor> f32_inputs;
    for (const at::Tensor& w : bf16) {
      f32_inputs.push_back(at::randn({rows, w.size(1)}));
      inputs.push_back(f32_inputs.back().to(at::kBFloat16));
    }
    const auto each = [&](const std::function<void(size_t)>& product) {
      return [&, product] {
        for (size_t i = 0; i < bf16.size(); ++i) product(i);
      };
    };
    nlohmann::json point = {{"rows", rows}};
    point["bf16_ms"] = {{"placer", MedianMilliseconds(each([&](size_t i) {
                           model::SmallBatchLinearBf16(inputs[i], bf16[i], {}, model::DetectBf16Isa());
                         }), runs)}};
    // The operands widened to float32 for sgemm, what Linear gives long chunks on AVX2 alone.
    point["bf16_ms"]["widened_sgemm"] = MedianMilliseconds(each([&](size_t i) {
      model::WidenedBf16Linear(inputs[i], bf16[i], {});
    }), runs);
    // ATen's BF16 GEMM only where it has a vector path (AtenBf16GemmIsVectorized).
    if (model::AtenBf16GemmIsVectorized()) {
      point["bf16_ms"]["aten"] =
          MedianMilliseconds(each([&](size_t i) { at::linear(inputs[i], bf16[i]); }), runs);
    }
    for (size_t s = 0; s < schemes.size(); ++s) {
      nlohmann::json ways;
      for (model::QuantIsa isa : isas) {
        ways[model::QuantIsaName(isa)] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearKernel(inputs[i], packed[s][i], {}, isa);
        }), runs);
      }
      // The 4-bit x BF16 kernel (AVX512-BF16), which serving picks for BF16 rows where it runs.
      if (model::UsesInt4Bf16Kernel(inputs.front(), packed[s].front(), {})) {
        ways["int4_bf16"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearInt4Bf16(inputs[i], packed[s][i], {});
        }), runs);
      }
      // The 8-bit x BF16 kernel (AVX512-BF16), likewise.
      if (model::UsesInt8Bf16Kernel(inputs.front(), packed[s].front(), {})) {
        ways["int8_bf16"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearInt8Bf16(inputs[i], packed[s][i], {});
        }), runs);
      }
      // 8-bit codes in groups of 128s on AVX512-VNNI: the three-digit kernel (serving's choice
      // for these rows where it runs).
      if (model::UsesInt8DigitsKernel(inputs.front(), packed[s].front(), {})) {
        ways["int8_digits"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearInt8Digits(inputs[i], packed[s][i], {});
        }), runs);
      }
      // Prompt chunks: the weight unpacked into a reused buffer (the best ISA; "none" is the
      // loader's scalar unpacking), then Linear, as serving does (ATen's BF16 GEMM past a few
      // rows where oneDNN has BF16 kernels, the few-row BF16 kernel on AVX2 alone).
      at::Tensor scratch;
      for (model::QuantIsa isa : {model::DetectQuantIsa(), model::QuantIsa::kNone}) {
        ways[std::string("unpack_") + model::QuantIsaName(isa) + "_gemm"] =
            MedianMilliseconds(each([&](size_t i) {
          model::UnpackQuantizedWeight(packed[s][i], at::kBFloat16, isa, scratch);
          model::Linear(inputs[i], scratch);
        }), runs);
      }
      // Or the three-digit kernel, which takes BF16 decode rows on AVX2 alone.
      if (model::UsesInt4DigitsKernel(inputs.front(), packed[s].front(), {})) {
        ways["int4_digits"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearInt4Digits(inputs[i], packed[s][i], {});
        }), runs);
      }
      // Or the AMX tiles (one part: a BF16 input is its own hi).
      if (model::UsesQuantizedTilesKernel(inputs.front(), packed[s].front(), {})) {
        ways["bf16_tiles"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearTiles(inputs[i], packed[s][i], {});
        }), runs);
      }
      // Or the BF16 prompt-chunk kernel, each task's rows unpacked where it uses them.
      if (model::PromptChunkBf16Runs() && model::DetectQuantIsa() == model::QuantIsa::kAvx512) {
        ways["prompt_chunk"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedPromptChunkBf16(inputs[i], packed[s][i], {});
        }), runs);
      }
      point[std::string(schemes[s].name) + "_ms"] = ways;
      // F32 rows (an F32 checkpoint under --quantize): the best ISA's kernels against the weight
      // unpacked to float32 and placer's F32 Linear (its few-row kernels or sgemm).
      nlohmann::json f32_ways;
      f32_ways[model::QuantIsaName(isas.front())] = MedianMilliseconds(each([&](size_t i) {
        model::QuantizedLinearKernel(f32_inputs[i], packed[s][i], {}, isas.front());
      }), runs);
      // 4-bit codes in groups of 128s on AVX512-VNNI or AVX2 alone: the three-digit kernel
      // QuantizedLinear takes instead (its float32-grade integer products), as "int4_digits";
      // its AVX2 form as "int4_digits_avx2" where that is not the one taken.
      if (model::UsesInt4DigitsKernel(f32_inputs.front(), packed[s].front(), {})) {
        f32_ways["int4_digits"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearInt4Digits(f32_inputs[i], packed[s][i], {});
        }), runs);
        if (model::DetectInt4DigitsIsa() != model::Int4DigitsIsa::kAvx2 &&
            model::Int4DigitsAvx2Runs()) {
          f32_ways["int4_digits_avx2"] = MedianMilliseconds(each([&](size_t i) {
            model::QuantizedLinearInt4Digits(f32_inputs[i], packed[s][i], {},
                                             model::Int4DigitsIsa::kAvx2);
          }), runs);
        }
      }
      if (model::UsesInt8DigitsKernel(f32_inputs.front(), packed[s].front(), {})) {
        f32_ways["int8_digits"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearInt8Digits(f32_inputs[i], packed[s][i], {});
        }), runs);
      }
      f32_ways["unpack_gemm"] = MedianMilliseconds(each([&](size_t i) {
        model::UnpackQuantizedWeight(packed[s][i], at::kFloat, isas.front(), scratch);
        model::Linear(f32_inputs[i], scratch);
      }), runs);
      // Prompt chunks of 4-bit and 8-bit codes on AMX: the tiles kernel, against what
      // QuantizedLinear gave those chunks before it (each task's weight rows unpacked for the F32
      // prompt-chunk kernel, or the whole weight for the few-row kernels or sgemm).
      // Or as digits on AMX-INT8 (groups of 128s), what QuantizedLinear takes where it runs.
      if (model::UsesDigitTilesKernel(f32_inputs.front(), packed[s].front(), {})) {
        f32_ways["digit_tiles"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearDigitTiles(f32_inputs[i], packed[s][i], {});
        }), runs);
      }
      if (model::UsesQuantizedTilesKernel(f32_inputs.front(), packed[s].front(), {})) {
        f32_ways["bf16_tiles"] = MedianMilliseconds(each([&](size_t i) {
          model::QuantizedLinearTiles(f32_inputs[i], packed[s][i], {});
        }), runs);
      }
      // What QuantizedLinear gives chunks past QuantizedLinearMaxRows: on AVX-512 and AVX2 the
      // F32 prompt-chunk kernel, each task's rows unpacked where it uses them.
      f32_ways["unpacked_quantized_linear"] = MedianMilliseconds(each([&](size_t i) {
        model::UnpackedQuantizedLinear(f32_inputs[i], packed[s][i], {});
      }), runs);
      // --quantize-activations int8: F32 rows quantized per block, 4-bit codes by VNNI (the
      // best ISA as "int8_activations", each other runnable one under its name).
      const loader::PackedLayout layout = *loader::PackedLayoutOf(packed[s].front());
      if (model::Int8ActivationKernelApplies(layout)) {
        for (model::Int8ActivationIsa isa : model::RunnableInt8ActivationIsas()) {
          const std::string column =
              isa == model::DetectInt8ActivationIsa()
                  ? "int8_activations"
                  : std::string("int8_activations_") + model::Int8ActivationIsaName(isa);
          f32_ways[column] = MedianMilliseconds(each([&](size_t i) {
            model::QuantizedLinearInt8Activations(f32_inputs[i], packed[s][i], {}, isa);
          }), runs);
        }
        // Their prompt chunks on AMX-INT8 (QuantizedLinear's choice past 16 rows).
        if (model::Int8ActivationTilesRun() && model::Int8ActivationTilesApply(layout)) {
          f32_ways["int8_activation_tiles"] = MedianMilliseconds(each([&](size_t i) {
            model::QuantizedLinearInt8ActivationTiles(f32_inputs[i], packed[s][i], {});
          }), runs);
        }
      }
      point[std::string(schemes[s].name) + "_f32_ms"] = f32_ways;
    }
    points.push_back(point);
  }
  // Where the kernels stop and unpack + GEMM takes over, per scheme and row dtype.
  nlohmann::json max_rows;
  for (size_t s = 0; s < schemes.size(); ++s) {
    const loader::PackedLayout layout = *loader::PackedLayoutOf(packed[s].front());
    max_rows[schemes[s].name] = {
        {"f32", model::QuantizedLinearMaxRows(model::DetectQuantIsa(), layout, at::kFloat)},
        {"bf16", model::QuantizedLinearMaxRows(model::DetectQuantIsa(), layout, at::kBFloat16)}};
  }
  nlohmann::json isa_names = nlohmann::json::array();
  for (model::QuantIsa isa : isas) isa_names.push_back(model::QuantIsaName(isa));
  return {{"isas", isa_names},
          {"bf16_isa", model::Bf16IsaName(model::DetectBf16Isa())},
          {"aten_bf16_gemm_vectorized", model::AtenBf16GemmIsVectorized()},
          {"max_rows", max_rows},
          {"bf16_gemm_amx", model::BfloatGemmHasAmx()},
          {"threads", at::get_num_threads()},
          {"bytes_per_pass", bytes},
          {"runs", runs},
          {"points", points}};
}

}  // namespace placer::bench
