#include "loader/hf_layout.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace placer::loader {
namespace {

using Init = ExpectedTensor::Init;

void AddLlamaFamily(const ModelConfig& c, std::vector<ExpectedTensor>& out) {
  const std::int64_t q_out = c.num_attention_heads * c.head_dim;
  const std::int64_t kv_out = c.num_key_value_heads * c.head_dim;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, Init::kNormal});
  for (std::int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = absl::StrCat("model.layers.", layer, ".");
    out.push_back({p + "self_attn.q_proj.weight", {q_out, c.hidden_size}, Init::kNormal});
    if (c.qkv_bias) out.push_back({p + "self_attn.q_proj.bias", {q_out}, Init::kZeros});
    out.push_back({p + "self_attn.k_proj.weight", {kv_out, c.hidden_size}, Init::kNormal});
    if (c.qkv_bias) out.push_back({p + "self_attn.k_proj.bias", {kv_out}, Init::kZeros});
    out.push_back({p + "self_attn.v_proj.weight", {kv_out, c.hidden_size}, Init::kNormal});
    if (c.qkv_bias) out.push_back({p + "self_attn.v_proj.bias", {kv_out}, Init::kZeros});
    out.push_back({p + "self_attn.o_proj.weight", {c.hidden_size, q_out}, Init::kNormal});
    if (c.o_proj_bias) out.push_back({p + "self_attn.o_proj.bias", {c.hidden_size}, Init::kZeros});
    out.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, Init::kNormal});
    if (c.mlp_bias) out.push_back({p + "mlp.gate_proj.bias", {c.intermediate_size}, Init::kZeros});
    out.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}, Init::kNormal});
    if (c.mlp_bias) out.push_back({p + "mlp.up_proj.bias", {c.intermediate_size}, Init::kZeros});
    out.push_back({p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}, Init::kNormal});
    if (c.mlp_bias) out.push_back({p + "mlp.down_proj.bias", {c.hidden_size}, Init::kZeros});
    out.push_back({p + "input_layernorm.weight", {c.hidden_size}, Init::kOnes});
    out.push_back({p + "post_attention_layernorm.weight", {c.hidden_size}, Init::kOnes});
  }
  out.push_back({"model.norm.weight", {c.hidden_size}, Init::kOnes});
  if (!c.tie_word_embeddings) {
    out.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}, Init::kNormal});
  }
}

// GPT-2 uses Conv1D, whose weight is stored [in_features, out_features].
void AddGpt2(const ModelConfig& c, std::vector<ExpectedTensor>& out) {
  const std::int64_t h = c.hidden_size;
  const std::int64_t inner = c.intermediate_size;
  out.push_back({"transformer.wte.weight", {c.vocab_size, h}, Init::kNormal});
  out.push_back({"transformer.wpe.weight", {c.max_position_embeddings, h}, Init::kNormal});
  for (std::int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = absl::StrCat("transformer.h.", layer, ".");
    out.push_back({p + "ln_1.weight", {h}, Init::kOnes});
    out.push_back({p + "ln_1.bias", {h}, Init::kZeros});
    out.push_back({p + "attn.c_attn.weight", {h, 3 * h}, Init::kNormal});
    out.push_back({p + "attn.c_attn.bias", {3 * h}, Init::kZeros});
    out.push_back({p + "attn.c_proj.weight", {h, h}, Init::kNormal});
    out.push_back({p + "attn.c_proj.bias", {h}, Init::kZeros});
    out.push_back({p + "ln_2.weight", {h}, Init::kOnes});
    out.push_back({p + "ln_2.bias", {h}, Init::kZeros});
    out.push_back({p + "mlp.c_fc.weight", {h, inner}, Init::kNormal});
    out.push_back({p + "mlp.c_fc.bias", {inner}, Init::kZeros});
    out.push_back({p + "mlp.c_proj.weight", {inner, h}, Init::kNormal});
    out.push_back({p + "mlp.c_proj.bias", {h}, Init::kZeros});
  }
  out.push_back({"transformer.ln_f.weight", {h}, Init::kOnes});
  out.push_back({"transformer.ln_f.bias", {h}, Init::kZeros});
  if (!c.tie_word_embeddings) {
    out.push_back({"lm_head.weight", {c.vocab_size, h}, Init::kNormal});
  }
}

}  // namespace

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config) {
  std::vector<ExpectedTensor> out;
  if (config.is_gpt2()) {
    AddGpt2(config, out);
  } else {
    AddLlamaFamily(config, out);
  }
  return out;
}

bool IsKnownNonParameterBuffer(const ModelConfig& config, const std::string& name) {
  if (config.is_gpt2()) {
    return absl::EndsWith(name, ".attn.bias") || absl::EndsWith(name, ".attn.masked_bias");
  }
  return absl::EndsWith(name, ".rotary_emb.inv_freq");
}

std::string CanonicalTensorName(const ModelConfig& config, const std::string& name) {
  if (config.is_gpt2() && !absl::StartsWith(name, "transformer.") &&
      !absl::StartsWith(name, "lm_head.")) {
    return "transformer." + name;
  }
  return name;
}

}  // namespace placer::loader
