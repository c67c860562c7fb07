// A causal language model ready to run: the server's view of model/. No libtorch types
// cross this header, so server code compiles without ATen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/dtype.h"
#include "placement/plan.h"
#include "runtime/runtime_accounting.h"
#include "runtime/block_hook.h"
#include "runtime/runtime_plan.h"

namespace placer::loader {
class Checkpoint;
}

namespace placer::model {

// Row-major float32 logits: shape [positions, vocab].
struct Logits {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The keys and values of one sequence being generated; only the model that made it reads it.
class SequenceCache {
 public:
  virtual ~SequenceCache() = default;
  virtual int64_t length() const = 0;    // positions already computed
  virtual int64_t capacity() const = 0;  // positions it can hold
};

class CausalLm {
 public:
  virtual ~CausalLm() = default;

  // A cache for a sequence of at most `capacity` positions (prompt plus generated tokens),
  // its KV blocks taken now. RESOURCE_EXHAUSTED while too few blocks are free.
  virtual absl::StatusOr<std::unique_ptr<SequenceCache>> NewSequence(int64_t capacity) const = 0;
  // Runs `token_ids` at the positions after what `sequence` holds, adds them to it, and
  // returns the logits of the last one ([1, vocab]).
  virtual absl::StatusOr<Logits> Extend(SequenceCache& sequence,
                                        const std::vector<int32_t>& token_ids) const = 0;

  // Extend for many sequences in one forward pass (continuous batching): every weight is
  // read once for all of them. Returns the last position's logits of each, [batch, vocab],
  // in batch order. On an error no sequence advances; the error names the batch entry.
  struct SequenceStep {
    SequenceCache* sequence;
    std::vector<int32_t> token_ids;
  };
  virtual absl::StatusOr<Logits> ExtendBatch(const std::vector<SequenceStep>& batch) const = 0;

  // Runs the whole prompt from position 0 with a fresh cache. With all_positions the logits
  // of every position, else of the last one. Errors name the offending token or tensor.
  virtual absl::StatusOr<Logits> Forward(const std::vector<int32_t>& token_ids,
                                         bool all_positions) const = 0;

  virtual int64_t vocab_size() const = 0;
  // The longest sequence served: the model's context, or less (ModelRuntime).
  virtual int64_t max_positions() const = 0;
};

// Where the model runs and where its memory is counted.
struct ModelRuntime {
  runtime::RuntimePlan plan = runtime::RuntimePlan::AllOnCpu();
  // Created from the plan's devices when not given.
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  // The longest sequence (prompt and generated tokens) served; 0: the model's context.
  int64_t max_sequence_length = 0;
  // Blocks of placement::kKvBlockPositions positions in the paged KV cache, shared by all
  // sequences (placement::KvCacheBlocks of the serving limits); 0: room for 8 sequences of
  // the longest length. CPU pools are virtual memory until blocks fill.
  int64_t kv_cache_blocks = 0;
  // Weights, activations and the KV cache: F32, BF16 (CPU or GPU) or F16 (GPU only: the CPU
  // has no F16 matrix multiply). Norms, softmax and logits are computed in F32 regardless.
  loader::DType compute_dtype = loader::DType::kF32;
  // Hooks run on every block's call after the default ones (runtime/block_runner.h): one more
  // concern without touching the model's code.
  std::vector<std::shared_ptr<runtime::BlockHook>> extra_hooks = {};
};

// Binds every weight of the checkpoint where the plan puts it (zero-copy views over the
// mapped shards for cpu and disk when the stored dtype is the compute dtype) and returns the
// architecture's model, which runs each block on its execution device.
absl::StatusOr<std::unique_ptr<CausalLm>> LoadCausalLm(
    std::shared_ptr<const loader::Checkpoint> checkpoint, ModelRuntime runtime = {});

// The run time a plan was made for, built from the plan alone (its device map, execution
// device and sizing: serving limits, KV blocks, compute dtype, virtual GPUs, prefetch, offload
// dir), so that what runs is exactly what was planned. `accounting`: null creates one over the
// plan's devices.
absl::StatusOr<std::unique_ptr<CausalLm>> LoadPlacedModel(
    std::shared_ptr<const loader::Checkpoint> checkpoint, const placement::Plan& plan,
    std::shared_ptr<runtime::RuntimeAccounting> accounting = nullptr,
    std::vector<std::shared_ptr<runtime::BlockHook>> extra_hooks = {});

// Intra-op threads of the tensor library (ATen defaults to 1 on some machines).
void SetComputeThreads(int threads);
int ComputeThreads();

// The BLAS shared library this process really mapped (libtorch calls whatever libblas.so.3
// the system selects, and the reference BLAS is many times slower than OpenBLAS).
std::string BlasLibraryInUse();

}  // namespace placer::model
