#include "model/gpt2.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/architectures/gpt2.h"
#include "loader/quantized_weight.h"
#include "model/forward_runner.h"
#include "model/quantized_linear.h"
#include "model/small_batch_linear.h"
#include "model/tensor_ops.h"
#include "base/status_macros.h"

namespace placer::model {
namespace {

using namespace loader;  // NOLINT: the slot names kGpt2*

// Conv1D stores [in, out]: y = x @ W + b. A decode step's few rows go through our kernel
// (as fast as sgemm there, and batch-invariant), more through BLAS.
at::Tensor Conv1D(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  // Quantized, the weight was packed transposed ([out, in]): a plain linear map.
  if (loader::IsPackedWeight(weight)) return QuantizedLinear(x, weight, bias);
  const VectorIsa isa = DetectVectorIsa();
  if (x.size(0) <= SmallBatchLinearMaxRows(isa, WeightLayout::kInOut) &&
      SmallBatchLinearApplies(x, weight, bias, WeightLayout::kInOut)) {
    return SmallBatchLinear(x, weight, bias, isa, WeightLayout::kInOut);
  }
  // BF16 (a BF16 GPT-2 served as it is) has no [in, out] kernel, and ATen's BF16 GEMM gives a
  // row other bits inside a larger product: a decode step's few rows go one at a time, the
  // same one-row product alone or batched (reading the weight once per row).
  constexpr int64_t kRowByRowRows = 8;
  if (x.scalar_type() != at::kFloat && x.device().is_cpu() && x.size(0) <= kRowByRowRows) {
    at::Tensor y = at::empty({x.size(0), weight.size(1)}, x.options());
    for (int64_t r = 0; r < x.size(0); ++r) {
      at::Tensor row = y.narrow(0, r, 1);
      at::addmm_out(row, bias, x.narrow(0, r, 1), weight);
    }
    return y;
  }
  return at::addmm(bias, x, weight);
}

class Gpt2 final : public DecoderOnlyModel {
 public:
  Gpt2(const loader::ModelConfig& config, std::unique_ptr<runtime::BlockRunner> runner)
      : DecoderOnlyModel(config, std::move(runner), DescribeGpt2(config).first_layer_block()) {}

 protected:
  void RunBlock(size_t block, const runtime::BlockWeights& w, BlockState& state) const override {
    const int64_t layers = config().num_hidden_layers;
    const int64_t hidden_size = config().hidden_size;
    if (block == 0) {
      state.hidden = EmbeddingRows(w[0], state.tokens, compute_type());
    } else if (block == 1) {
      std::vector<at::Tensor> positions;
      for (const SequenceRows& sequence : state.sequences) {
        positions.push_back(at::arange(sequence.start, sequence.start + sequence.length,
                                       at::TensorOptions().dtype(at::kLong)));
      }
      state.hidden = state.hidden + at::embedding(w[0], at::cat(positions).to(w[0].device()));
    } else if (layer_of(block) < layers) {
      RunLayer(layer_of(block), w, state);
    } else if (layer_of(block) == layers) {
      state.hidden = at::layer_norm(state.hidden, {hidden_size}, w[0], w[1], config().norm_eps);
    } else {
      // The tied head: packed under --quantize-lm-head, else ATen's linear as before.
      state.hidden = loader::IsPackedWeight(w[0]) ? Linear(state.hidden, w[0])
                                                  : at::linear(state.hidden, w[0]);
    }
  }

 private:
  void RunLayer(int64_t index, const runtime::BlockWeights& w, BlockState& state) const {
    const int64_t rows = state.hidden.size(0);
    const int64_t hidden_size = config().hidden_size;
    const int64_t heads = config().num_attention_heads;
    const int64_t head_dim = hidden_size / heads;
    const double eps = config().norm_eps;
    at::Tensor& hidden = state.hidden;
    const at::Tensor x = at::layer_norm(hidden, {hidden_size}, w[kGpt2Ln1Weight], w[kGpt2Ln1Bias], eps);
    const std::vector<at::Tensor> qkv = Conv1D(x, w[kGpt2AttnWeight], w[kGpt2AttnBias]).split(hidden_size, -1);
    auto heads_of = [&](const at::Tensor& t) { return t.view({rows, heads, head_dim}); };
    const at::Tensor all = AttendSequences(state.sequences, index, heads_of(qkv[0]),
                                           heads_of(qkv[1]), heads_of(qkv[2]), /*window=*/0);
    hidden = hidden + Conv1D(all.view({rows, hidden_size}), w[kGpt2AttnProjWeight], w[kGpt2AttnProjBias]);
    const at::Tensor y = at::layer_norm(hidden, {hidden_size}, w[kGpt2Ln2Weight], w[kGpt2Ln2Bias], eps);
    const at::Tensor activated = at::gelu(Conv1D(y, w[kGpt2FcWeight], w[kGpt2FcBias]), "tanh");
    hidden = hidden + Conv1D(activated, w[kGpt2MlpProjWeight], w[kGpt2MlpProjBias]);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<CausalLm>> LoadGpt2(
    std::shared_ptr<const loader::Checkpoint> checkpoint, const ModelRuntime& runtime) {
  return BindDecoderOnly<Gpt2>(checkpoint, runtime, DescribeGpt2(checkpoint->config()));
}

}  // namespace placer::model
