// QuantizedLinears / LinearsOfOneInput over packed weights (a layer's q, k and v; gate and up):
// one preparation of the input and one parallel loop over every weight's outputs must give
// each weight's QuantizedLinear bit for bit, on every kernel this CPU runs (the three-digit,
// vdpbf16ps, int8-activation and ISA kernels; prompt chunks), with odd output counts whose
// tasks the loop's chunks split across weights, biases on some weights only, and weights that
// cannot share their input (other group sizes), which fall back to one call each.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <vector>

#include "loader/quantized_weight.h"
#include "model/packed_product.h"
#include "model/quantized_linear.h"
#include "model/quantized_vnni.h"
#include "model/tensor_ops.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

at::Tensor Pack(int bits, int64_t out, int64_t in, int64_t group, int seed) {
  const loader::PackedLayout layout{bits, out, in, group};
  absl::StatusOr<at::Tensor> packed =
      loader::QuantizeLinearWeight(SeededRandn({out, in}, seed), layout, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  return *packed;
}

// Outputs of 300 (5 tasks of 64), 40 (1) and 200 (4): two threads' chunks (3, 2, 2, ...) end
// inside other weights' tasks, one thread's single range spans all three.
constexpr int64_t kOuts[] = {300, 40, 200};

struct Layer {
  std::vector<at::Tensor> weights, biases;
};

Layer PackedLayer(int bits, int64_t in, int64_t group, at::ScalarType bias_type, int seed) {
  Layer layer;
  for (int64_t out : kOuts) {
    layer.weights.push_back(Pack(bits, out, in, group, ++seed));
    // Only the middle weight has no bias (Qwen2's q/k/v have biases, Llama's none).
    layer.biases.push_back(out == 40 ? at::Tensor() : SeededRandn({out}, ++seed).to(bias_type));
  }
  return layer;
}

void ExpectEachWeightsOwnProduct(const at::Tensor& x, const Layer& layer) {
  const std::vector<at::Tensor> together = QuantizedLinears(x, layer.weights, layer.biases);
  const std::vector<at::Tensor> through_linears = LinearsOfOneInput(x, layer.weights, layer.biases);
  ASSERT_EQ(together.size(), layer.weights.size());
  ASSERT_EQ(through_linears.size(), layer.weights.size());
  for (size_t i = 0; i < layer.weights.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "weight " << i);
    const at::Tensor alone = QuantizedLinear(x, layer.weights[i], layer.biases[i]);
    EXPECT_EQ(together[i].sizes(), alone.sizes());
    EXPECT_EQ(together[i].scalar_type(), x.scalar_type());
    EXPECT_TRUE(at::equal(together[i], alone));
    EXPECT_TRUE(at::equal(through_linears[i], alone));
  }
}

struct Scheme {
  int bits;
  int64_t in, group;
};

// int4 in groups of 128 (three-digit and int4 x BF16 kernels) and 32 (the ISA kernels), int8
// per output channel and in groups of 64s (int8 x BF16).
const Scheme kSchemes[] = {{4, 256, 128}, {4, 96, 32}, {8, 200, 200}, {8, 256, 64}};

TEST(QuantizedLinears, EachWeightGetsItsOwnProductBitForBit) {
  if (DetectQuantIsa() == QuantIsa::kNone) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
  int seed = 0;
  for (const Scheme& scheme : kSchemes) {
    for (at::ScalarType compute : {at::kFloat, at::kBFloat16}) {
      const Layer layer = PackedLayer(scheme.bits, scheme.in, scheme.group, compute, seed += 10);
      ASSERT_TRUE(PackedWeightsShareInputs(layer.weights));
      const int64_t max_rows =
          QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(layer.weights[0]), compute);
      // Decode steps, a batch at the kernels' limit, a prompt chunk past it, and one the
      // prompt-chunk kernels take, each task's weight rows unpacked (one call for all weights).
      for (int64_t rows : {int64_t{1}, int64_t{3}, max_rows, max_rows + 5, int64_t{64}}) {
        SCOPED_TRACE(testing::Message() << "bits " << scheme.bits << " group " << scheme.group
                                        << " " << at::toString(compute) << " rows " << rows);
        ExpectEachWeightsOwnProduct(SeededRandn({rows, scheme.in}, ++seed).to(compute), layer);
      }
    }
  }
}

TEST(QuantizedLinears, OneThreadsRangeSpanningEveryWeightGivesTheSameOutputs) {
  if (DetectQuantIsa() == QuantIsa::kNone) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
  const int threads = at::get_num_threads();
  const Layer layer = PackedLayer(4, 256, 128, at::kFloat, 50);
  const at::Tensor x = SeededRandn({2, 256}, 51);
  at::set_num_threads(1);
  const std::vector<at::Tensor> one_thread = QuantizedLinears(x, layer.weights, layer.biases);
  at::set_num_threads(threads);
  for (size_t i = 0; i < layer.weights.size(); ++i) {
    EXPECT_TRUE(at::equal(one_thread[i], QuantizedLinear(x, layer.weights[i], layer.biases[i])))
        << "weight " << i;
  }
}

TEST(QuantizedLinears, Int8ActivationsAreQuantizedOnceAndServeEveryWeight) {
  if (!Int8ActivationKernelRuns()) GTEST_SKIP() << "this CPU lacks AVX2";
  SetInt8Activations(true);
  int seed = 60;
  for (const Scheme& scheme : {Scheme{4, 256, 128}, Scheme{4, 96, 32}, Scheme{8, 256, 256}}) {
    const Layer layer = PackedLayer(scheme.bits, scheme.in, scheme.group, at::kFloat, seed += 10);
    for (int64_t rows : {1, 4, 40}) {
      SCOPED_TRACE(testing::Message() << "bits " << scheme.bits << " group " << scheme.group
                                      << " rows " << rows);
      ExpectEachWeightsOwnProduct(SeededRandn({rows, scheme.in}, ++seed), layer);
    }
  }
  SetInt8Activations(false);
}

TEST(QuantizedLinears, WeightsOfOtherGroupSizesAreMultipliedOneByOne) {
  if (DetectQuantIsa() == QuantIsa::kNone) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
  Layer layer;
  layer.weights = {Pack(4, 70, 256, 128, 81), Pack(4, 33, 256, 32, 82), Pack(8, 65, 256, 256, 83)};
  layer.biases = {SeededRandn({70}, 84), at::Tensor(), SeededRandn({65}, 85)};
  EXPECT_FALSE(PackedWeightsShareInputs(layer.weights));
  EXPECT_FALSE(PackedWeightsShareInputs({layer.weights[0], SeededRandn({70, 256}, 86)}));
  EXPECT_FALSE(PackedWeightsShareInputs({}));
  for (at::ScalarType compute : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(at::toString(compute));
    ExpectEachWeightsOwnProduct(SeededRandn({2, 256}, 87).to(compute), layer);
    // A prompt chunk: every weight's rows unpacked by its own layout in one call.
    ExpectEachWeightsOwnProduct(SeededRandn({64, 256}, 88).to(compute), layer);
  }
}

}  // namespace
}  // namespace placer::model
