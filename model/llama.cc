#include "model/llama.h"

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/architectures/llama_family.h"
#include "model/forward_runner.h"
#include "model/rotary.h"
#include "model/row_kernels.h"
#include "model/silu_times.h"
#include "model/tensor_ops.h"
#include "base/status_macros.h"

namespace placer::model {
namespace {

using namespace loader;  // NOLINT: the slot names kLlama*

class Llama final : public DecoderOnlyModel {
 public:
  Llama(const loader::ModelConfig& config, std::unique_ptr<runtime::BlockRunner> runner)
      : DecoderOnlyModel(config, std::move(runner),
                         DescribeLlamaFamily(config).first_layer_block()),
        rotary_(config) {}

  // GPTQ activation-order checkpoints: each projection's input is gathered in its order.
  static constexpr bool kGathersReorderedInputs = true;

 protected:
  void RunBlock(size_t block, const runtime::BlockWeights& w, BlockState& state) const override {
    const int64_t layers = config().num_hidden_layers;
    if (block == 0) {
      state.hidden = EmbeddingRows(w[0], state.tokens, compute_type());
    } else if (layer_of(block) < layers) {
      RunLayer(block, w, state);
    } else if (layer_of(block) == layers) {
      state.hidden = RmsNorm(state.hidden, w[0], config().norm_eps);
    } else {
      // A GPTQ lm_head (lm_head: true) may reorder its inputs too (desc_act).
      InputGather x(input_orders(), block, state.hidden);
      state.hidden = Linear(x.For(0), w[0]);
    }
  }

 private:
  void RunLayer(size_t block, const runtime::BlockWeights& w, BlockState& state) const {
    const int64_t index = layer_of(block);
    const int64_t rows = state.hidden.size(0);
    const int64_t heads = config().num_attention_heads;
    const int64_t kv_heads = config().num_key_value_heads;
    const int64_t head_dim = config().head_dim;
    at::Tensor& hidden = state.hidden;
    // Projections and the MLP see every sequence's rows at once (one read of the weights);
    // attention is per sequence.
    InputGather x(input_orders(), block, RmsNorm(hidden, w[kLlamaInputNorm], config().norm_eps));
    const std::vector<at::Tensor> qkv =
        Projections(x, w, {kLlamaQ, kLlamaK, kLlamaV}, {kLlamaQBias, kLlamaKBias, kLlamaVBias});
    const at::Tensor& q = qkv[0];
    const at::Tensor& k = qkv[1];
    const at::Tensor& v = qkv[2];
    // Rotary positions for all rows at once (a handful of operations per layer instead of a
    // score per sequence), unless the frequencies depend on each sequence's length.
    at::Tensor q_all = q.view({rows, heads, head_dim});
    at::Tensor k_all = k.view({rows, kv_heads, head_dim});
    const bool rows_at_once = !rotary_.length_dependent();
    if (rows_at_once) {
      std::vector<int64_t> positions;
      positions.reserve(static_cast<size_t>(rows));
      for (const SequenceRows& sequence : state.sequences) {
        for (int64_t i = 0; i < sequence.length; ++i) positions.push_back(sequence.start + i);
      }
      std::tie(q_all, k_all) = rotary_.ApplyRows(q_all, k_all, positions);
    }
    const int64_t window = config().attention_window(index);
    at::Tensor all;
    if (rows_at_once) {
      all = AttendSequences(state.sequences, index, q_all, k_all,
                            v.view({rows, kv_heads, head_dim}), window);
    } else {
      std::vector<at::Tensor> attended;
      for (const SequenceRows& sequence : state.sequences) {
        const int64_t length = sequence.length;
        auto rows_of = [&](const at::Tensor& t, int64_t n_heads) {
          return t.narrow(0, sequence.offset, length).view({length, n_heads, head_dim}).transpose(0, 1);
        };
        auto [q_rotated, k_rotated] =
            rotary_.Apply(rows_of(q_all, heads), rows_of(k_all, kv_heads), sequence.start);
        auto [keys, values] = KeysAndValues(sequence, index, k_rotated, rows_of(v, kv_heads));
        attended.push_back(CausalAttention(q_rotated, keys, values, window)
                               .transpose(0, 1)
                               .reshape({length, heads * head_dim}));
      }
      all = attended.size() == 1 ? attended[0] : at::cat(attended, 0);
    }
    InputGather attended(input_orders(), block, all.view({rows, heads * head_dim}));
    hidden = AddRows(hidden, Linear(attended.For(kLlamaO), w[kLlamaO], w[kLlamaOBias]));
    InputGather y(input_orders(), block, RmsNorm(hidden, w[kLlamaPostNorm], config().norm_eps));
    const std::vector<at::Tensor> gate_up =
        Projections(y, w, {kLlamaGate, kLlamaUp}, {kLlamaGateBias, kLlamaUpBias});
    InputGather gated(input_orders(), block, SiluTimes(gate_up[0], gate_up[1]));
    hidden = AddRows(hidden, Linear(gated.For(kLlamaDown), w[kLlamaDown], w[kLlamaDownBias]));
  }

  // The projections of one input by the weights in `slots` (+ the biases in `bias_slots`): one
  // call where every slot sees x in the same order (LinearsOfOneInput), else one Linear each.
  static std::vector<at::Tensor> Projections(InputGather& x, const runtime::BlockWeights& w,
                                             const std::vector<size_t>& slots,
                                             const std::vector<size_t>& bias_slots) {
    std::vector<at::Tensor> inputs, weights, biases;
    for (size_t i = 0; i < slots.size(); ++i) {
      inputs.push_back(x.For(slots[i]));
      weights.push_back(w[slots[i]]);
      biases.push_back(w[bias_slots[i]]);
    }
    bool shared = true;
    for (const at::Tensor& input : inputs) shared = shared && input.is_same(inputs[0]);
    if (shared) return LinearsOfOneInput(inputs[0], weights, biases);
    std::vector<at::Tensor> ys;
    for (size_t i = 0; i < slots.size(); ++i) ys.push_back(Linear(inputs[i], weights[i], biases[i]));
    return ys;
  }

  RotaryEmbedding rotary_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CausalLm>> LoadLlama(
    std::shared_ptr<const loader::Checkpoint> checkpoint, const ModelRuntime& runtime) {
  return BindDecoderOnly<Llama>(checkpoint, runtime, DescribeLlamaFamily(checkpoint->config()));
}

}  // namespace placer::model
