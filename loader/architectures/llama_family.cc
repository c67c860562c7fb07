#include "loader/architectures/llama_family.h"

#include "absl/strings/str_cat.h"

namespace placer::loader {

ArchitectureDescription DescribeLlamaFamily(const ModelConfig& c) {
  const std::int64_t h = c.hidden_size;
  const std::int64_t q_out = c.num_attention_heads * c.head_dim;
  const std::int64_t kv_out = c.num_key_value_heads * c.head_dim;
  const std::int64_t inner = c.intermediate_size;
  std::string layer_class = "LlamaDecoderLayer";
  if (c.architecture == Architecture::kMistral) layer_class = "MistralDecoderLayer";
  if (c.architecture == Architecture::kQwen2) layer_class = "Qwen2DecoderLayer";

  ArchitectureDescription out;
  out.buffer_suffixes = {".rotary_emb.inv_freq"};
  out.blocks.push_back({"model.embed_tokens", "", /*row_lookup=*/true,
                        {TensorDescription::Of("model.embed_tokens.weight", {c.vocab_size, h})}});
  for (std::int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    BlockDescription block{absl::StrCat("model.layers.", layer), layer_class, false, {}};
    block.tensors.resize(kLlamaLayerSlots);
    auto slot = [&](LlamaLayerSlot index, const char* name, std::vector<std::int64_t> shape,
                    TensorInit init = TensorInit::kNormal, bool present = true) {
      const bool weight = init == TensorInit::kNormal;  // the projections; biases are zeros
      block.tensors[index] = {absl::StrCat(block.module, ".", name), std::move(shape), init,
                              present, "", weight ? LinearWeight::kOutIn : LinearWeight::kNone};
    };
    const TensorInit bias = TensorInit::kZeros;
    slot(kLlamaQ, "self_attn.q_proj.weight", {q_out, h});
    slot(kLlamaQBias, "self_attn.q_proj.bias", {q_out}, bias, c.qkv_bias);
    slot(kLlamaK, "self_attn.k_proj.weight", {kv_out, h});
    slot(kLlamaKBias, "self_attn.k_proj.bias", {kv_out}, bias, c.qkv_bias);
    slot(kLlamaV, "self_attn.v_proj.weight", {kv_out, h});
    slot(kLlamaVBias, "self_attn.v_proj.bias", {kv_out}, bias, c.qkv_bias);
    slot(kLlamaO, "self_attn.o_proj.weight", {h, q_out});
    slot(kLlamaOBias, "self_attn.o_proj.bias", {h}, bias, c.o_proj_bias);
    slot(kLlamaGate, "mlp.gate_proj.weight", {inner, h});
    slot(kLlamaGateBias, "mlp.gate_proj.bias", {inner}, bias, c.mlp_bias);
    slot(kLlamaUp, "mlp.up_proj.weight", {inner, h});
    slot(kLlamaUpBias, "mlp.up_proj.bias", {inner}, bias, c.mlp_bias);
    slot(kLlamaDown, "mlp.down_proj.weight", {h, inner});
    slot(kLlamaDownBias, "mlp.down_proj.bias", {h}, bias, c.mlp_bias);
    slot(kLlamaInputNorm, "input_layernorm.weight", {h}, TensorInit::kOnes);
    slot(kLlamaPostNorm, "post_attention_layernorm.weight", {h}, TensorInit::kOnes);
    out.blocks.push_back(std::move(block));
  }
  out.blocks.push_back({"model.norm", "", false, {TensorDescription::Of("model.norm.weight", {h}, TensorInit::kOnes)}});
  TensorDescription head = TensorDescription::Of("lm_head.weight", {c.vocab_size, h});
  head.lm_head = true;
  if (c.tie_word_embeddings) head.tied_to = "model.embed_tokens.weight";
  out.blocks.push_back({"lm_head", "", false, {head}});
  MarkTiedLmHeadTable(out);
  return out;
}

}  // namespace placer::loader
