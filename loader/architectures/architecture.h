// One description per architecture: the single place that says which blocks a model runs,
// in which order, which tensors each block reads (named as transformers names them, shaped
// from config.json, present or not by its flags), which blocks stay whole on one device,
// which tensors are tied and which blocks are row lookups. Everything else is derived from
// it and never retyped: the tensors the loader expects and the writer writes
// (ExpectedTensors), the module tree the planner sees (placement/model_module_tree.h) and the
// block specs the run time binds (placement/block_spec.h). Torch-free.
//
// Adding an architecture is one description (a Describe* function here) and one forward
// file in model/; the forward file indexes a block's weights by the slot enum its
// description header declares.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loader/model_config.h"

namespace placer::loader {

// What a freshly initialised transformers model holds in a tensor. The checkpoint writer
// starts from it but perturbs ones and zeros (loader/random_fill.h), so that a test
// checkpoint exercises every tensor.
enum class TensorInit { kNormal, kOnes, kZeros };

// A decoder layer's linear-map weight, which --quantize packs (loader/quantized_layout.h):
// stored [out, in] as nn.Linear does, or [in, out] as GPT-2's Conv1D does (packed transposed).
// kNone for every other tensor (embeddings, norms, biases, lm_head).
enum class LinearWeight { kNone, kOutIn, kInOut };

// One weight slot of a block.
struct TensorDescription {
  std::string name;  // full checkpoint name, e.g. "model.layers.3.mlp.up_proj.bias"
  std::vector<std::int64_t> shape;
  TensorInit init = TensorInit::kNormal;
  // False when config.json leaves the tensor out (a bias with attention_bias false): the
  // checkpoint must not hold it and the block sees an undefined tensor in its slot.
  bool present = true;
  // Set for a tied tensor: the checkpoint tensor that the slot reads instead (a tied
  // lm_head.weight reads model.embed_tokens.weight). The checkpoint may omit `name` then.
  std::string tied_to;
  LinearWeight linear = LinearWeight::kNone;
  // The lm_head's weight ([vocab, hidden], as nn.Linear stores it): packed only under
  // --quantize-lm-head.
  bool lm_head = false;
  // The token embedding a tied lm_head reads (MarkTiedLmHeadTable): under --quantize-lm-head
  // packed with the head's options, one table for both, whose lookup dequantizes its rows.
  bool tied_lm_head_table = false;

  static TensorDescription Of(std::string name, std::vector<std::int64_t> shape,
                              TensorInit init = TensorInit::kNormal) {
    return {std::move(name), std::move(shape), init, true, "", LinearWeight::kNone, false, false};
  }
  // The checkpoint tensor whose bytes fill the slot.
  const std::string& source() const { return tied_to.empty() ? name : tied_to; }
};

// A block is the unit placed on one device and run whole: an embedding, one decoder layer,
// the final norm, the lm_head.
struct BlockDescription {
  std::string module;  // "model.layers.3"
  // Decoder layers: a no-split module of this class ("LlamaDecoderLayer") that holds a KV
  // cache. Empty for the other blocks.
  std::string decoder_layer_class;
  // Reads a few rows of its table per pass (an embedding): offloaded, it is looked up where
  // its weights are instead of staged whole.
  bool row_lookup = false;
  std::vector<TensorDescription> tensors;  // slots, in state_dict order

  bool decoder_layer() const { return !decoder_layer_class.empty(); }
};

struct ArchitectureDescription {
  std::vector<BlockDescription> blocks;  // in execution order, which is state_dict order
  // Prefix that Hub checkpoints sometimes drop from stored names (GPT-2's "transformer.");
  // tensor names here always carry it.
  std::string droppable_prefix;
  // Name suffixes of buffers real checkpoints carry that are not parameters (GPT-2's causal
  // mask "attn.bias", old Llama "rotary_emb.inv_freq"): tolerated and never loaded.
  std::vector<std::string> buffer_suffixes;

  // Index of the first decoder layer among `blocks`.
  std::size_t first_layer_block() const;
  // Every slot, block by block.
  std::vector<const TensorDescription*> Slots() const;
  // The tensors a checkpoint must hold, in state_dict order: present, untied slots.
  std::vector<const TensorDescription*> CheckpointTensors() const;
  std::string CanonicalName(const std::string& stored_name) const;
  bool IsNonParameterBuffer(const std::string& canonical_name) const;
};

ArchitectureDescription DescribeArchitecture(const ModelConfig& config);

// Sets tied_lm_head_table on the slot a tied lm_head reads (each Describe* calls it last).
void MarkTiedLmHeadTable(ArchitectureDescription& architecture);

// The description's checkpoint tensors as the writer and the loader use them.
struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  TensorInit init = TensorInit::kNormal;
};
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config);

bool IsKnownNonParameterBuffer(const ModelConfig& config, const std::string& name);
std::string CanonicalTensorName(const ModelConfig& config, const std::string& name);

}  // namespace placer::loader
