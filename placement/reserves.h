// Reserves computed from the model config (DESIGN.md "reserve"): room held
// back on a device for what generation allocates besides the weights.
#pragma once

#include <cstdint>

#include "loader/dtype.h"
#include "loader/model_config.h"

namespace placer::placement {

struct ServingLimits {
  std::int64_t max_seq_len = 0;     // --max-seq-len: prompt + generated tokens
  std::int64_t max_batch_size = 1;  // --max-batch-size: sequences per forward
  // --max-batch-total-tokens: KV-cache positions all running sequences share (paged);
  // 0: max_seq_len x max_batch_size, so every running sequence can reach max_seq_len.
  std::int64_t max_batch_total_tokens = 0;
};

// The KV cache is paged in blocks of this many positions (model/kv_block_pool.h); a
// sequence takes whole blocks, so the reserve counts max_seq_len rounded up to them.
inline constexpr std::int64_t kKvBlockPositions = 16;

// Blocks one sequence of `positions` positions takes.
std::int64_t KvBlocksFor(std::int64_t positions);

// KV-cache blocks of the pool: max_batch_size x the blocks of one max_seq_len sequence,
// or max_batch_total_tokens in blocks (never fewer than one longest sequence needs). With a
// `window` on every layer (ModelConfig::shared_attention_window) a sequence needs only the
// blocks of min(max_seq_len, window) positions.
std::int64_t KvCacheBlocks(const ServingLimits& limits, std::int64_t window = 0);

// Exactly 2 (K and V) x kv_heads x head_dim x bytes per element x KvCacheBlocks x
// kKvBlockPositions: the KV cache one decoder layer keeps, which is what the runtime's
// block pool allocates.
std::uint64_t KvCacheBytesPerLayer(const loader::ModelConfig& config,
                                   const ServingLimits& limits, loader::DType kv_dtype);

// An estimate of the transient memory of one forward call at the largest
// batch the daemon admits (a prefill of max_batch_size x max_seq_len tokens
// with eager attention), in the compute dtype of `e` bytes per element:
//   layer  = T*(4*H + max(q+k+v widths, 3*I))*e  +  2*B*heads*S*S*4
//            (residual, normed input, attention output and layer output;
//             the wider of the q/k/v projections and the MLP's gate, up and
//             product; F32 attention scores and softmax probabilities)
//   logits = B*V*(e + 4)  (last-position logits and their F32 copy)
//   reserve = max(layer, logits)
// with T = B*S tokens, H hidden, I intermediate, V vocab. Only this formula sizes
// the reserve: nothing measures a block's transient memory at run time (libtorch
// allocates it inside its kernels), on the CPU or on CUDA.
std::uint64_t ActivationReserveBytes(const loader::ModelConfig& config,
                                     const ServingLimits& limits, loader::DType compute_dtype);

// With packed weights, one product may hold its weight dequantized: the reused buffer of prompt
// chunks on the CPU, the per-product dequantization on a GPU. The largest packed weight in `e`
// bytes per element: of a decoder layer's linears (loader::LinearWeight slots) when
// `layers_packed`, and the lm_head ([vocab, hidden], usually far larger) when `head_packed`;
// 0 when neither is. Added to the activation reserve.
std::uint64_t DequantizedWeightReserveBytes(const loader::ModelConfig& config, bool layers_packed,
                                            bool head_packed, loader::DType compute_dtype);

}  // namespace placer::placement
