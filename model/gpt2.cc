#include "model/gpt2.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "model/forward_runner.h"
#include "model/tensor_ops.h"
#include "model/weight_binder.h"

namespace placer::model {
namespace {

struct Gpt2Layer {
  at::Tensor ln1_weight, ln1_bias, attn_weight, attn_bias, attn_proj_weight, attn_proj_bias;
  at::Tensor ln2_weight, ln2_bias, fc_weight, fc_bias, mlp_proj_weight, mlp_proj_bias;
};

// Conv1D stores [in, out]: y = x @ W + b.
at::Tensor Conv1D(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return at::addmm(bias, x, weight);
}

class Gpt2 final : public DecoderOnlyModel {
 public:
  Gpt2(const loader::ModelConfig& config, WeightBinder& weights) : DecoderOnlyModel(config) {
    token_embedding_ = weights.Required("transformer.wte.weight");
    position_embedding_ = weights.Required("transformer.wpe.weight");
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      const std::string prefix = absl::StrCat("transformer.h.", i, ".");
      Gpt2Layer layer;
      layer.ln1_weight = weights.Required(prefix + "ln_1.weight");
      layer.ln1_bias = weights.Required(prefix + "ln_1.bias");
      layer.attn_weight = weights.Required(prefix + "attn.c_attn.weight");
      layer.attn_bias = weights.Required(prefix + "attn.c_attn.bias");
      layer.attn_proj_weight = weights.Required(prefix + "attn.c_proj.weight");
      layer.attn_proj_bias = weights.Required(prefix + "attn.c_proj.bias");
      layer.ln2_weight = weights.Required(prefix + "ln_2.weight");
      layer.ln2_bias = weights.Required(prefix + "ln_2.bias");
      layer.fc_weight = weights.Required(prefix + "mlp.c_fc.weight");
      layer.fc_bias = weights.Required(prefix + "mlp.c_fc.bias");
      layer.mlp_proj_weight = weights.Required(prefix + "mlp.c_proj.weight");
      layer.mlp_proj_bias = weights.Required(prefix + "mlp.c_proj.bias");
      layers_.push_back(std::move(layer));
    }
    final_norm_weight_ = weights.Required("transformer.ln_f.weight");
    final_norm_bias_ = weights.Required("transformer.ln_f.bias");
  }

 protected:
  at::Tensor Run(const at::Tensor& tokens, KvCache& cache) const override {
    const int64_t length = tokens.size(0);
    const int64_t hidden_size = config().hidden_size;
    const int64_t heads = config().num_attention_heads;
    const int64_t head_dim = hidden_size / heads;
    const double eps = config().norm_eps;
    const int64_t start = cache.length();
    const at::Tensor positions =
        at::arange(start, start + length, at::TensorOptions().dtype(at::kLong));
    at::Tensor hidden =
        at::embedding(token_embedding_, tokens) + at::embedding(position_embedding_, positions);
    for (size_t index = 0; index < layers_.size(); ++index) {
      const Gpt2Layer& layer = layers_[index];
      const at::Tensor x =
          at::layer_norm(hidden, {hidden_size}, layer.ln1_weight, layer.ln1_bias, eps);
      const std::vector<at::Tensor> qkv =
          Conv1D(x, layer.attn_weight, layer.attn_bias).split(hidden_size, -1);
      auto heads_first = [&](const at::Tensor& t) {
        return t.view({length, heads, head_dim}).transpose(0, 1);
      };
      auto [keys, values] =
          cache.Append(static_cast<int64_t>(index), heads_first(qkv[1]), heads_first(qkv[2]));
      const at::Tensor attended = CausalAttention(heads_first(qkv[0]), keys, values);
      hidden = hidden + Conv1D(attended.transpose(0, 1).reshape({length, hidden_size}),
                               layer.attn_proj_weight, layer.attn_proj_bias);
      const at::Tensor y =
          at::layer_norm(hidden, {hidden_size}, layer.ln2_weight, layer.ln2_bias, eps);
      const at::Tensor activated =
          at::gelu(Conv1D(y, layer.fc_weight, layer.fc_bias), /*approximate=*/"tanh");
      hidden = hidden + Conv1D(activated, layer.mlp_proj_weight, layer.mlp_proj_bias);
    }
    hidden = at::layer_norm(hidden, {hidden_size}, final_norm_weight_, final_norm_bias_, eps);
    return at::linear(hidden, token_embedding_);
  }

 private:
  at::Tensor token_embedding_, position_embedding_, final_norm_weight_, final_norm_bias_;
  std::vector<Gpt2Layer> layers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CausalLm>> LoadGpt2(
    std::shared_ptr<const loader::Checkpoint> checkpoint) {
  WeightBinder weights(checkpoint, at::kFloat);
  auto model = std::make_unique<Gpt2>(checkpoint->config(), weights);
  if (!weights.status().ok()) return weights.status();
  return model;
}

}  // namespace placer::model
