#include "placement/reserves.h"

#include <algorithm>
#include <limits>

#include "loader/architectures/architecture.h"

namespace placer::placement {
namespace {

// Saturates instead of wrapping: a reserve that large only means "does not fit".
std::uint64_t Mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return a * b;
}

std::uint64_t Add(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

std::uint64_t NonNegative(std::int64_t v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

}  // namespace

std::int64_t KvBlocksFor(std::int64_t positions) {
  if (positions <= 0) return 0;
  return (positions + kKvBlockPositions - 1) / kKvBlockPositions;
}

std::int64_t KvCacheBlocks(const ServingLimits& limits, std::int64_t window) {
  const std::int64_t per_sequence = KvBlocksFor(
      window > 0 ? std::min(limits.max_seq_len, window) : limits.max_seq_len);
  if (limits.max_batch_total_tokens > 0) {
    return std::max(per_sequence, KvBlocksFor(limits.max_batch_total_tokens));
  }
  return static_cast<std::int64_t>(Mul(NonNegative(per_sequence), NonNegative(limits.max_batch_size)));
}

std::uint64_t KvCacheBytesPerLayer(const loader::ModelConfig& config,
                                   const ServingLimits& limits, loader::DType kv_dtype) {
  std::uint64_t bytes = 2;
  bytes = Mul(bytes, NonNegative(config.num_key_value_heads));
  bytes = Mul(bytes, NonNegative(config.head_dim));
  bytes = Mul(bytes, loader::DTypeSize(kv_dtype));
  return Mul(bytes, Mul(NonNegative(KvCacheBlocks(limits, config.shared_attention_window())),
                       kKvBlockPositions));
}

std::uint64_t ActivationReserveBytes(const loader::ModelConfig& config,
                                     const ServingLimits& limits, loader::DType compute_dtype) {
  const std::uint64_t e = loader::DTypeSize(compute_dtype);
  const std::uint64_t batch = NonNegative(limits.max_batch_size);
  const std::uint64_t seq = NonNegative(limits.max_seq_len);
  const std::uint64_t tokens = Mul(batch, seq);
  const std::uint64_t hidden = NonNegative(config.hidden_size);
  const std::uint64_t head_dim = NonNegative(config.head_dim);
  const std::uint64_t qkv_width =
      Mul(Add(NonNegative(config.num_attention_heads),
              Mul(2, NonNegative(config.num_key_value_heads))),
          head_dim);
  const std::uint64_t mlp_width = Mul(3, NonNegative(config.intermediate_size));
  const std::uint64_t per_token = Add(Mul(4, hidden), std::max(qkv_width, mlp_width));
  const std::uint64_t scores =
      Mul(Mul(Mul(Mul(2, batch), NonNegative(config.num_attention_heads)), Mul(seq, seq)), 4);
  const std::uint64_t layer = Add(Mul(Mul(tokens, per_token), e), scores);
  const std::uint64_t logits = Mul(Mul(batch, NonNegative(config.vocab_size)), e + 4);
  return std::max(layer, logits);
}

std::uint64_t DequantizedWeightReserveBytes(const loader::ModelConfig& config, bool layers_packed,
                                            bool head_packed, loader::DType compute_dtype) {
  std::uint64_t largest = 0;
  const loader::ArchitectureDescription architecture = loader::DescribeArchitecture(config);
  for (const loader::TensorDescription* slot : architecture.Slots()) {
    const bool packed = slot->lm_head ? head_packed
                                      : layers_packed && slot->linear != loader::LinearWeight::kNone;
    if (!packed || slot->shape.size() != 2) continue;
    largest = std::max(largest, Mul(NonNegative(slot->shape[0]), NonNegative(slot->shape[1])));
  }
  return Mul(largest, loader::DTypeSize(compute_dtype));
}

}  // namespace placer::placement
