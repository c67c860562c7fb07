#include "model/llama.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "model/forward_runner.h"
#include "model/rotary.h"
#include "model/tensor_ops.h"
#include "model/weight_binder.h"

namespace placer::model {
namespace {

struct LlamaLayer {
  at::Tensor input_norm, q, k, v, o, q_bias, k_bias, v_bias, post_norm, gate, up, down;
};

class Llama final : public DecoderOnlyModel {
 public:
  Llama(const loader::ModelConfig& config, WeightBinder& weights)
      : DecoderOnlyModel(config), rotary_(config) {
    embed_ = weights.Required("model.embed_tokens.weight");
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      const std::string prefix = absl::StrCat("model.layers.", i, ".");
      LlamaLayer layer;
      layer.input_norm = weights.Required(prefix + "input_layernorm.weight");
      layer.q = weights.Required(prefix + "self_attn.q_proj.weight");
      layer.k = weights.Required(prefix + "self_attn.k_proj.weight");
      layer.v = weights.Required(prefix + "self_attn.v_proj.weight");
      layer.o = weights.Required(prefix + "self_attn.o_proj.weight");
      layer.q_bias = weights.Optional(prefix + "self_attn.q_proj.bias");
      layer.k_bias = weights.Optional(prefix + "self_attn.k_proj.bias");
      layer.v_bias = weights.Optional(prefix + "self_attn.v_proj.bias");
      layer.post_norm = weights.Required(prefix + "post_attention_layernorm.weight");
      layer.gate = weights.Required(prefix + "mlp.gate_proj.weight");
      layer.up = weights.Required(prefix + "mlp.up_proj.weight");
      layer.down = weights.Required(prefix + "mlp.down_proj.weight");
      layers_.push_back(std::move(layer));
    }
    final_norm_ = weights.Required("model.norm.weight");
    lm_head_ = config.tie_word_embeddings ? embed_ : weights.Required("lm_head.weight");
  }

 protected:
  at::Tensor Run(const at::Tensor& tokens, KvCache& cache) const override {
    const int64_t length = tokens.size(0);
    const int64_t heads = config().num_attention_heads;
    const int64_t kv_heads = config().num_key_value_heads;
    const int64_t head_dim = config().head_dim;
    const int64_t start = cache.length();
    at::Tensor hidden = at::embedding(embed_, tokens);
    for (size_t index = 0; index < layers_.size(); ++index) {
      const LlamaLayer& layer = layers_[index];
      const at::Tensor x = RmsNorm(hidden, layer.input_norm, config().norm_eps);
      const at::Tensor q = Linear(x, layer.q, layer.q_bias).view({length, heads, head_dim});
      const at::Tensor k = Linear(x, layer.k, layer.k_bias).view({length, kv_heads, head_dim});
      const at::Tensor v = Linear(x, layer.v, layer.v_bias).view({length, kv_heads, head_dim});
      auto [q_rotated, k_rotated] = rotary_.Apply(q.transpose(0, 1), k.transpose(0, 1), start);
      auto [keys, values] = cache.Append(static_cast<int64_t>(index), k_rotated, v.transpose(0, 1));
      const at::Tensor attended = CausalAttention(q_rotated, keys, values);
      hidden = hidden + Linear(attended.transpose(0, 1).reshape({length, heads * head_dim}),
                               layer.o);
      const at::Tensor y = RmsNorm(hidden, layer.post_norm, config().norm_eps);
      hidden = hidden + Linear(at::silu(Linear(y, layer.gate)) * Linear(y, layer.up), layer.down);
    }
    return Linear(RmsNorm(hidden, final_norm_, config().norm_eps), lm_head_);
  }

 private:
  RotaryEmbedding rotary_;
  at::Tensor embed_, final_norm_, lm_head_;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CausalLm>> LoadLlama(
    std::shared_ptr<const loader::Checkpoint> checkpoint) {
  WeightBinder weights(checkpoint, at::kFloat);
  auto model = std::make_unique<Llama>(checkpoint->config(), weights);
  if (!weights.status().ok()) return weights.status();
  return model;
}

}  // namespace placer::model
