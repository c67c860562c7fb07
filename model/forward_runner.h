// What every decoder-only architecture shares around its arithmetic: checking the request,
// walking the blocks in order through the placement hooks (which put each block's inputs and
// weights on its execution device), the KV cache on each layer's device, catching libtorch's
// exceptions at the module border, and copying logits out.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/architectures/architecture.h"
#include "loader/model_config.h"
#include "loader/quantized_slots.h"
#include "model/bf16_repacker.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"
#include "model/linear_input_orders.h"
#include "runtime/block_runner.h"

namespace placer::model {

struct DecodedLayout;  // model/stage_layout.h

// One sequence's rows in a forward pass.
struct SequenceRows {
  int64_t offset = 0;  // first row in BlockState::tokens / hidden
  int64_t length = 0;  // rows (new tokens) of this sequence
  int64_t start = 0;   // position of its first new token
  KvCache* cache = nullptr;  // null for a one-off Forward: attention sees this pass only
};

// The tensor type of runtime.compute_dtype.
at::ScalarType ComputeScalarType(const ModelRuntime& runtime);

// The keys and values a sequence's queries attend to in decoder layer `layer`: this pass's
// `k`/`v` appended to its cache, or just them when it has none.
std::pair<at::Tensor, at::Tensor> KeysAndValues(const SequenceRows& sequence, int64_t layer,
                                                const at::Tensor& k, const at::Tensor& v);

// Whether a chunk of `rows` new tokens ending at position `end` (exclusive), with heads of
// `head_dim`, goes through DecodeAttention's per-row loops: always where its AVX-512 kernel
// takes the heads (it outran ATen's causal attention 2.7x on a 1000-token prompt, and never
// holds a [heads, rows, end] score matrix), else only short chunks, since the AVX2 loops'
// arithmetic grows as rows x end like a GEMM's but runs at a fraction of its speed
// (bench/analysis.md).
bool PromptRowsAttendAsDecodeRows(int64_t rows, int64_t end, int64_t head_dim);

// Attention of every sequence of a pass in decoder layer `layer` (appending to each one's
// cache): q [rows, heads, head_dim] and k, v [rows, kv_heads, head_dim], already rotated.
// A sequence's single decode row goes through DecodeAttention over its cache when the layer's
// pool is on the CPU (float32 or BF16), so that row's result is the same in any batch; so do
// the rows of a short prompt chunk (PromptRowsAttendAsDecodeRows) of a cache that is not a
// ring, and a one-off Forward's short prompt: ATen's ~25 small operators per sequence and
// layer cost more than their arithmetic there. Other sequences go through CausalAttention. Returns [rows, heads * head_dim].
at::Tensor AttendSequences(const std::vector<SequenceRows>& sequences, int64_t layer,
                           const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t window);

// What flows from block to block during one forward pass: the new tokens of every sequence
// in the batch, stacked row after row.
struct BlockState {
  at::Tensor tokens;  // int64 [T]
  at::Tensor hidden;  // [T, hidden]; the last block leaves logits [T, vocab] here
  std::vector<SequenceRows> sequences;
};

class DecoderOnlyModel : public CausalLm {
 public:
  DecoderOnlyModel(const loader::ModelConfig& config,
                   std::unique_ptr<runtime::BlockRunner> runner, int64_t first_layer_block)
      : config_(config), runner_(std::move(runner)), first_layer_block_(first_layer_block) {}

  // The paged KV cache for runtime.kv_cache_sequences sequences of the longest length served,
  // on each layer's execution device. Called once, before the model is used.
  absl::Status AllocateKvCache(const ModelRuntime& runtime);

  absl::StatusOr<Logits> Forward(const std::vector<int32_t>& token_ids,
                                 bool all_positions) const final;
  absl::StatusOr<std::unique_ptr<SequenceCache>> NewSequence(int64_t capacity) const final;
  absl::StatusOr<Logits> Extend(SequenceCache& sequence,
                                const std::vector<int32_t>& token_ids) const final;
  absl::StatusOr<Logits> ExtendBatch(const std::vector<SequenceStep>& batch) const final;
  int64_t vocab_size() const final { return config_.vocab_size; }
  // A later pipeline stage's share of the leader's pass: this process's blocks (decoder
  // layers) over `hidden` [rows, width], the rows as the leader described them
  // (model/stage_layout.h). The hidden states after them, in host memory; a bad layout or a
  // failed block is an error (and what the step wrote over positions still read is put back).
  // `step` keeps the step's view of the caches: when the leader fails the step later, its
  // RollbackStageStep puts back what the step overwrote in a ring, as the leader does.
  absl::StatusOr<at::Tensor> RunStage(const std::vector<int64_t>& layout, at::Tensor hidden,
                                      DecodedLayout* step) const;
  int64_t max_positions() const final { return max_positions_; }
  // The paged KV cache of this process's layers (a pipeline stage shares its figures).
  const std::shared_ptr<KvBlockPool>& kv_pool() const { return kv_pool_; }
  // Whether any block this process runs executes on a real (CUDA) GPU.
  bool computes_on_cuda() const;

 protected:
  // Block `block`'s arithmetic, with its weights (in BlockSpec order) and `state` on its
  // execution device. Decoder layer l is block first_layer_block + l and appends each
  // sequence's keys and values to its cache.
  virtual void RunBlock(size_t block, const runtime::BlockWeights& weights,
                        BlockState& state) const = 0;
  const loader::ModelConfig& config() const { return config_; }
  // The orders block inputs are gathered in before reordered linear weights (GPTQ desc_act).
  // Only a Model that declares `static constexpr bool kGathersReorderedInputs = true` (and
  // gathers through InputGather) is bound to a checkpoint that has any.
  const LinearInputOrders& input_orders() const { return *input_orders_; }
  // The dtype blocks compute in (what a packed embedding table's rows are dequantized to).
  at::ScalarType compute_type() const { return compute_type_; }
  int64_t layer_of(size_t block) const { return static_cast<int64_t>(block) - first_layer_block_; }

 public:
  static constexpr bool kGathersReorderedInputs = false;
  void set_input_orders(std::shared_ptr<const LinearInputOrders> orders) {
    input_orders_ = std::move(orders);
  }
  void set_compute_type(at::ScalarType type) { compute_type_ = type; }

 private:
  absl::Status CheckTokens(const std::vector<int32_t>& token_ids, int64_t room) const;
  absl::StatusOr<Logits> RunChecked(const std::vector<SequenceStep>& batch,
                                    bool all_positions) const;
  // Logits of every row, or (!all_positions) of each sequence's last row, from `pass`
  // (finished; the caller abandons it if it fails the step after).
  at::Tensor Run(runtime::BlockRunner::Pass& pass, BlockState state, bool all_positions) const;

  loader::ModelConfig config_;
  std::unique_ptr<runtime::BlockRunner> runner_;
  int64_t first_layer_block_;
  int64_t max_positions_ = 0;
  // The window of every layer when all have one (a sequence then needs only that many
  // positions: KvCache's ring), else 0.
  int64_t ring_window_ = 0;
  std::shared_ptr<KvBlockPool> kv_pool_;
  std::shared_ptr<const LinearInputOrders> input_orders_ = std::make_shared<LinearInputOrders>();
  at::ScalarType compute_type_ = at::kFloat;
};

// What every architecture's Load does: binds the description's blocks where runtime.plan puts
// them, builds `Model` (a DecoderOnlyModel constructed from (config, runner)) and its KV cache.
template <class Model>
absl::StatusOr<std::unique_ptr<CausalLm>> BindDecoderOnly(
    const std::shared_ptr<const loader::Checkpoint>& checkpoint, const ModelRuntime& runtime,
    const loader::ArchitectureDescription& architecture) {
  PLACER_ASSIGN_OR_RETURN(std::shared_ptr<const LinearInputOrders> input_orders,
                          LinearInputOrders::Read(*checkpoint, architecture));
  if (!input_orders->empty() && !Model::kGathersReorderedInputs) {
    return absl::UnimplementedError(absl::StrCat(
        checkpoint->dir(), ": ", input_orders->first_slot_name(),
        "'s g_idx reorders its inputs (GPTQ desc_act, activation order), which placer's ",
        loader::ArchitectureName(checkpoint->config().architecture),
        " does not serve yet (the Llama family does; or requantize with desc_act false)"));
  }
  PLACER_ASSIGN_OR_RETURN(
      auto runner, runtime::BlockRunner::Create(checkpoint, runtime::BlockSpecsFor(architecture),
                                                runtime.plan, ComputeScalarType(runtime),
                                                runtime.accounting, runtime.extra_hooks,
                                                Bf16WeightRepacker(ComputeScalarType(runtime))));
  auto model = std::make_unique<Model>(checkpoint->config(), std::move(runner));
  model->set_input_orders(std::move(input_orders));
  model->set_compute_type(ComputeScalarType(runtime));
  PLACER_RETURN_IF_ERROR(model->AllocateKvCache(runtime));
  return model;
}

}  // namespace placer::model
