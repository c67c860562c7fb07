#include "loader/architectures/gpt2.h"

#include "absl/strings/str_cat.h"

namespace placer::loader {

ArchitectureDescription DescribeGpt2(const ModelConfig& c) {
  const std::int64_t h = c.hidden_size;
  const std::int64_t inner = c.intermediate_size;
  ArchitectureDescription out;
  out.droppable_prefix = "transformer.";
  out.buffer_suffixes = {".attn.bias", ".attn.masked_bias"};
  out.blocks.push_back({"transformer.wte", "", /*row_lookup=*/true,
                        {TensorDescription::Of("transformer.wte.weight", {c.vocab_size, h})}});
  out.blocks.push_back({"transformer.wpe", "", /*row_lookup=*/true,
                        {TensorDescription::Of("transformer.wpe.weight", {c.max_position_embeddings, h})}});
  for (std::int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    BlockDescription block{absl::StrCat("transformer.h.", layer), "GPT2Block", false, {}};
    block.tensors.resize(kGpt2LayerSlots);
    auto slot = [&](Gpt2LayerSlot index, const char* name, std::vector<std::int64_t> shape,
                    TensorInit init = TensorInit::kNormal) {
      const bool weight = init == TensorInit::kNormal;  // the Conv1D weights
      block.tensors[index] = {absl::StrCat(block.module, ".", name), std::move(shape), init,
                              true, "", weight ? LinearWeight::kInOut : LinearWeight::kNone};
    };
    // Conv1D stores its weight [in_features, out_features].
    slot(kGpt2Ln1Weight, "ln_1.weight", {h}, TensorInit::kOnes);
    slot(kGpt2Ln1Bias, "ln_1.bias", {h}, TensorInit::kZeros);
    slot(kGpt2AttnWeight, "attn.c_attn.weight", {h, 3 * h});
    slot(kGpt2AttnBias, "attn.c_attn.bias", {3 * h}, TensorInit::kZeros);
    slot(kGpt2AttnProjWeight, "attn.c_proj.weight", {h, h});
    slot(kGpt2AttnProjBias, "attn.c_proj.bias", {h}, TensorInit::kZeros);
    slot(kGpt2Ln2Weight, "ln_2.weight", {h}, TensorInit::kOnes);
    slot(kGpt2Ln2Bias, "ln_2.bias", {h}, TensorInit::kZeros);
    slot(kGpt2FcWeight, "mlp.c_fc.weight", {h, inner});
    slot(kGpt2FcBias, "mlp.c_fc.bias", {inner}, TensorInit::kZeros);
    slot(kGpt2MlpProjWeight, "mlp.c_proj.weight", {inner, h});
    slot(kGpt2MlpProjBias, "mlp.c_proj.bias", {h}, TensorInit::kZeros);
    out.blocks.push_back(std::move(block));
  }
  out.blocks.push_back({"transformer.ln_f", "", false,
                        {TensorDescription::Of("transformer.ln_f.weight", {h}, TensorInit::kOnes),
                         TensorDescription::Of("transformer.ln_f.bias", {h}, TensorInit::kZeros)}});
  TensorDescription head = TensorDescription::Of("lm_head.weight", {c.vocab_size, h});
  head.lm_head = true;
  if (c.tie_word_embeddings) head.tied_to = "transformer.wte.weight";
  out.blocks.push_back({"lm_head", "", false, {head}});
  MarkTiedLmHeadTable(out);
  return out;
}

}  // namespace placer::loader
