#include "model/forward_runner.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/decode_attention.h"
#include "model/stage_layout.h"
#include "runtime/stage_pipeline.h"
#include "model/tensor_ops.h"
#include "base/status_macros.h"

namespace placer::model {

at::ScalarType ComputeScalarType(const ModelRuntime& runtime) {
  switch (runtime.compute_dtype) {
    case loader::DType::kBF16:
      return at::kBFloat16;
    case loader::DType::kF16:
      return at::kHalf;
    default:
      return at::kFloat;  // LoadCausalLm refuses every other dtype
  }
}

std::pair<at::Tensor, at::Tensor> KeysAndValues(const SequenceRows& sequence, int64_t layer,
                                                const at::Tensor& k, const at::Tensor& v) {
  if (sequence.cache == nullptr) return {k, v};
  return sequence.cache->Append(layer, k, v);
}

bool PromptRowsAttendAsDecodeRows(int64_t rows, int64_t end, int64_t head_dim) {
  constexpr int64_t kMostQueryKeyPairs = 256 * 256;
  return RowAttentionTakesAnyLength(head_dim) || rows * end <= kMostQueryKeyPairs;
}

at::Tensor AttendSequences(const std::vector<SequenceRows>& sequences, int64_t layer,
                           const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t window) {
  const int64_t rows = q.size(0);
  const int64_t heads = q.size(1);
  const int64_t kv_heads = k.size(1);
  const int64_t head_dim = q.size(2);
  at::Tensor out = at::empty({rows, heads * head_dim}, q.options());
  std::vector<DecodeRow> decode_rows;
  KvBlockPool* pool = nullptr;  // every cache of a model shares its pool
  for (const SequenceRows& sequence : sequences) {
    const int64_t length = sequence.length;
    if (sequence.cache != nullptr && DecodeAttentionApplies(sequence.cache->pool(), layer, q, k, v) &&
        (length == 1 || (!sequence.cache->ring() &&
                         PromptRowsAttendAsDecodeRows(length, sequence.cache->length() + length,
                                                      head_dim)))) {
      for (int64_t i = 0; i < length; ++i) {
        decode_rows.push_back(
            {sequence.offset + i, sequence.cache->length() + i, &sequence.cache->blocks()});
      }
      pool = &sequence.cache->pool();
      continue;
    }
    if (sequence.cache == nullptr && PromptRowsAttendAsDecodeRows(length, length, head_dim)) {
      // A one-off Forward: its keys and values in a scratch buffer of whole blocks, attended
      // row by row as a cached sequence's rows are (the same bits for the same rows).
      constexpr int64_t kBlock = KvBlockPool::kBlockPositions;
      const int64_t blocks = (length + kBlock - 1) / kBlock;
      at::Tensor keys = at::empty({kv_heads, blocks * kBlock, head_dim}, k.options());
      at::Tensor values = at::empty_like(keys);
      if (RowAttentionApplies(keys, values, q, k, v)) {
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
        std::vector<DecodeRow> rows;
        for (int64_t i = 0; i < length; ++i) rows.push_back({sequence.offset + i, i, &table});
        RowAttention(q, k, v, keys, values, window, rows, out);
        continue;
      }
    }
    auto rows_of = [&](const at::Tensor& t, int64_t n_heads) {
      return t.narrow(0, sequence.offset, length).view({length, n_heads, head_dim}).transpose(0, 1);
    };
    auto [keys, values] = KeysAndValues(sequence, layer, rows_of(k, kv_heads), rows_of(v, kv_heads));
    out.narrow(0, sequence.offset, length)
        .view({length, heads, head_dim})
        .copy_(CausalAttention(rows_of(q, heads), keys, values, window).transpose(0, 1));
  }
  if (!decode_rows.empty()) {
    DecodeAttention(q, k, v, *pool, layer, window, decode_rows, out);
  }
  return out;
}

absl::Status DecoderOnlyModel::AllocateKvCache(const ModelRuntime& runtime) {
  max_positions_ = config_.context_length();
  if (runtime.max_sequence_length > 0) {
    max_positions_ = std::min<int64_t>(max_positions_, runtime.max_sequence_length);
  }
  ring_window_ = config_.shared_attention_window();
  const int64_t sequence_blocks = placement::KvBlocksFor(
      ring_window_ > 0 ? std::min(max_positions_, ring_window_) : max_positions_);
  const int64_t blocks = runtime.kv_cache_blocks > 0 ? runtime.kv_cache_blocks : 8 * sequence_blocks;
  if (blocks < sequence_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a KV cache of ", blocks, " blocks cannot hold one sequence of ", max_positions_,
        " positions (", sequence_blocks, " blocks)"));
  }
  std::vector<KvBlockPool::LayerPlacement> layers;
  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    const size_t block = static_cast<size_t>(first_layer_block_ + layer);
    layers.push_back({runner_->torch_device(block), runner_->block(block).execution_device.Name(),
                      !runner_->block(block).other_stage});
  }
  PLACER_ASSIGN_OR_RETURN(
      auto pool,
      KvBlockPool::Create(std::move(layers), config_.num_key_value_heads, config_.head_dim, blocks,
                          ComputeScalarType(runtime), runtime.accounting));
  kv_pool_ = std::move(pool);
  return absl::OkStatus();
}

absl::Status DecoderOnlyModel::CheckTokens(const std::vector<int32_t>& token_ids,
                                           int64_t room) const {
  if (token_ids.empty()) return absl::InvalidArgumentError("token_ids: empty");
  if (static_cast<int64_t>(token_ids.size()) > room) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_ids: ", token_ids.size(), " positions, but only ", room,
                     " fit (at most ", max_positions_, " are served: the model's context, or --max-seq-len)"));
  }
  for (size_t i = 0; i < token_ids.size(); ++i) {
    if (token_ids[i] < 0 || token_ids[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_ids[", i, "]: ", token_ids[i], " is outside the vocabulary [0, ",
                       config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

// A failed pass leaves each sequence as it was before it: nothing committed, and nothing it
// still reads overwritten, so the engine can retry the sequences one by one.
void UndoStep(const BlockState& state) {
  for (const SequenceRows& rows : state.sequences) {
    if (rows.cache != nullptr) rows.cache->Rollback();
  }
}

}  // namespace

absl::StatusOr<Logits> DecoderOnlyModel::RunChecked(const std::vector<SequenceStep>& batch,
                                                    bool all_positions) const {
  if (batch.empty()) return absl::InvalidArgumentError("batch: empty");
  BlockState state;
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < batch.size(); ++i) {
    // No sequence: a one-off Forward from position 0 that keeps nothing.
    auto* cache = static_cast<KvCache*>(batch[i].sequence);
    absl::Status status = CheckTokens(
        batch[i].token_ids, cache == nullptr ? max_positions_ : cache->capacity() - cache->length());
    if (!status.ok()) {
      if (batch.size() == 1) return status;
      return absl::Status(status.code(), absl::StrCat("batch[", i, "]: ", status.message()));
    }
    state.sequences.push_back({static_cast<int64_t>(tokens.size()),
                               static_cast<int64_t>(batch[i].token_ids.size()),
                               cache == nullptr ? 0 : cache->length(), cache});
    tokens.insert(tokens.end(), batch[i].token_ids.begin(), batch[i].token_ids.end());
  }
  try {
    c10::InferenceMode inference;
    state.tokens = at::tensor(tokens, at::kLong);
    for (const SequenceRows& rows : state.sequences) {
      if (rows.cache != nullptr) rows.cache->BeginStep(rows.length);
    }
    Logits out;
    {
      runtime::BlockRunner::Pass pass(*runner_);
      try {
        // Everything up to the logits in hand is part of the step: a failure here (converting
        // rows x vocab, out of memory) abandons the pass, so the other stages undo it too.
        at::Tensor logits = Run(pass, state, all_positions).to(at::kFloat).contiguous();
        out.shape = {logits.size(0), logits.size(1)};
        const float* data = logits.data_ptr<float>();
        out.values.assign(data, data + logits.numel());
      } catch (...) {
        pass.Abandon();
        throw;
      }
    }
    for (const SequenceRows& rows : state.sequences) {
      if (rows.cache != nullptr) rows.cache->Commit(rows.length);
    }
    return out;
  } catch (const runtime::StageUnavailable& e) {
    UndoStep(state);
    return absl::UnavailableError(absl::StrCat("forward pass failed: ", e.what()));
  } catch (const c10::Error& e) {
    UndoStep(state);
    const std::string what = e.what_without_backtrace();
    // A device out of memory (an unusually long prompt) fails this request, not the daemon.
    if (what.find("out of memory") != std::string::npos ||
        what.find("can't allocate memory") != std::string::npos) {
      return absl::ResourceExhaustedError(absl::StrCat("forward pass failed: ", what));
    }
    return absl::InternalError(absl::StrCat("forward pass failed: ", what));
  } catch (const std::exception& e) {
    UndoStep(state);
    return absl::InternalError(absl::StrCat("forward pass failed: ", e.what()));
  }
}

at::Tensor DecoderOnlyModel::Run(runtime::BlockRunner::Pass& pass, BlockState state,
                                 bool all_positions) const {
  const size_t head = runner_->block_count() - 1;
  bool other_stages = false;
  for (size_t block = 0; block < runner_->block_count(); ++block) {
    other_stages = other_stages || runner_->block(block).other_stage;
  }
  if (other_stages) pass.SetLayout(EncodeStageLayout(state.sequences));
  for (size_t block = 0; block < runner_->block_count(); ++block) {
    // Another stage's layers: the pipeline hook on the block before them carried the pass there.
    if (runner_->block(block).other_stage) continue;
    if (block == head && !all_positions &&
        state.hidden.size(0) != static_cast<int64_t>(state.sequences.size())) {
      // Only each sequence's last row is sampled from: the lm_head skips the others (a decode
      // step, one row per sequence, has no others).
      std::vector<int64_t> last_rows;
      for (const SequenceRows& rows : state.sequences) {
        last_rows.push_back(rows.offset + rows.length - 1);
      }
      state.hidden = state.hidden.index_select(
          0, at::tensor(last_rows, at::kLong).to(state.hidden.device()));
    }
    at::Tensor* input = block == 0 ? &state.tokens : &state.hidden;
    RunBlock(block, pass.Enter(block, {input}), state);
    pass.Exit({&state.hidden});
  }
  return pass.Finish(std::move(state.hidden));
}

absl::StatusOr<at::Tensor> DecoderOnlyModel::RunStage(const std::vector<int64_t>& layout,
                                                     at::Tensor hidden, DecodedLayout* step) const {
  if (!hidden.defined() || hidden.dim() != 2 || hidden.size(1) != config_.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage step: hidden states must be [rows, ", config_.hidden_size, "]"));
  }
  PLACER_ASSIGN_OR_RETURN(*step, DecodeStageLayout(layout, hidden.size(0), kv_pool_, ring_window_));
  BlockState state;
  try {
    c10::InferenceMode inference;
    state.hidden = std::move(hidden);
    state.sequences = step->sequences;
    for (const SequenceRows& rows : state.sequences) {
      if (rows.cache != nullptr) rows.cache->BeginStep(rows.length);
    }
    runtime::BlockRunner::Pass pass(*runner_);
    for (size_t block = 0; block < runner_->block_count(); ++block) {
      if (runner_->block(block).other_stage) continue;
      RunBlock(block, pass.Enter(block, {&state.hidden}), state);
      pass.Exit({&state.hidden});
    }
    return pass.Finish(std::move(state.hidden)).contiguous();
  } catch (const c10::Error& e) {
    UndoStep(state);
    return absl::InternalError(absl::StrCat("stage step failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    UndoStep(state);
    return absl::InternalError(absl::StrCat("stage step failed: ", e.what()));
  }
}

bool DecoderOnlyModel::computes_on_cuda() const {
  for (size_t block = 0; block < runner_->block_count(); ++block) {
    if (!runner_->block(block).other_stage && runner_->torch_device(block).is_cuda()) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<SequenceCache>> DecoderOnlyModel::NewSequence(
    int64_t capacity) const {
  if (capacity < 1 || capacity > max_positions_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sequence of ", capacity, " positions does not fit the ", max_positions_,
                     " served (the model's context, or less with --max-seq-len)"));
  }
  // With a window on every layer, the positions of one window (rounded up to whole blocks)
  // serve a sequence of any length.
  const int64_t held =
      ring_window_ > 0
          ? std::min(capacity, placement::KvBlocksFor(ring_window_) * KvBlockPool::kBlockPositions)
          : capacity;
  PLACER_ASSIGN_OR_RETURN(auto blocks, kv_pool_->Take(held));
  return std::make_unique<KvCache>(kv_pool_, std::move(blocks), capacity, ring_window_);
}

absl::StatusOr<Logits> DecoderOnlyModel::Forward(const std::vector<int32_t>& token_ids,
                                                 bool all_positions) const {
  return RunChecked({{nullptr, token_ids}}, all_positions);
}

absl::StatusOr<Logits> DecoderOnlyModel::Extend(SequenceCache& sequence,
                                                const std::vector<int32_t>& token_ids) const {
  return RunChecked({{&sequence, token_ids}}, /*all_positions=*/false);
}

absl::StatusOr<Logits> DecoderOnlyModel::ExtendBatch(const std::vector<SequenceStep>& batch) const {
  return RunChecked(batch, /*all_positions=*/false);
}

}  // namespace placer::model
