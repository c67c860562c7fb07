#include "placement/plan_flags.h"

namespace placer::placement {

void AddPlacementFlags(CLI::App& app, PlacementOptions& options) {
  const char* group = "Placement";
  app.add_option("--devices", options.devices,
                 "virtual devices replacing the GPU probe, e.g. cuda:0=4GiB,cuda:1=4GiB,cpu=8GiB")
      ->group(group);
  app.add_option("--max-memory", options.max_memory,
                 "weight budgets in Accelerate's syntax, e.g. 0=20GiB,1=20GiB,cpu=64GiB")
      ->group(group);
  app.add_option("--gpu-memory-utilization", options.gpu_memory_utilization,
                 "share of each GPU's free memory placer may use when --max-memory is unset")
      ->check(CLI::Range(0.01, 1.0))
      ->group(group);
  app.add_option("--strategy", options.strategy, "how blocks are spread over the GPUs")
      ->check(CLI::IsMember({"sequential", "balanced", "balanced_low_0"}))
      ->group(group);
  app.add_option("--max-seq-len", options.max_seq_len,
                 "tokens per sequence the KV-cache reserve holds; 0 means min(context, 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->group(group);
  app.add_option("--max-batch-size", options.max_batch_size,
                 "sequences at once, for the KV-cache and activation reserves")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->group(group);
  app.add_option("--max-batch-total-tokens", options.max_batch_total_tokens,
                 "KV-cache positions all running sequences share (paged in blocks of 16), like "
                 "TGI's flag of that name; 0 means --max-seq-len x --max-batch-size")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->group(group);
  app.add_option("--offload-dir", options.offload_dir,
                 "directory for disk offload; without it nothing is placed on disk")
      ->group(group);
  app.add_option("--offload-exec", options.offload_exec,
                 "where blocks placed on cpu or disk run: auto (staged onto a GPU through two "
                 "slots, else one, else on the cpu), gpu (staged, two slots or one), cpu (where "
                 "their weights live; only activations move)")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->group(group);
  app.add_option("--quantize", options.quantize,
                 "pack the decoder layers' linear weights at load: int8 (one scale per output "
                 "channel) or int4 (groups of --quantize-group-size); planned in their packed "
                 "bytes. Embeddings, norms and (without --quantize-lm-head) lm_head keep the compute dtype")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->group(group);
  app.add_option("--quantize-lm-head", options.quantize_lm_head,
                 "pack the lm_head at load, int8 (one scale per output channel) or int4 (groups "
                 "of 128), with --quantize or alone (a GPTQ/AWQ/compressed-tensors checkpoint's "
                 "float head). It is the largest single weight and every decode step reads it "
                 "whole; llama.cpp's Q8_0 / Q4_0 quantize it too. A tied head packs the embedding "
                 "table it shares (the lookup dequantizes its rows)")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->group(group);
  app.add_option("--quantize-activations", options.quantize_activations,
                 "int8: 4-bit weights (groups of 32, 64 or a multiple of 128) and 8-bit ones (per "
                 "channel or groups of a multiple of 128), from --quantize or the checkpoint, "
                 "multiply activations quantized to int8 per 32, 64 or 128 inputs, with AVX512-VNNI or "
                 "AVX-VNNI, as llama.cpp's Q4_0 and Q8_0 do; faster, not exact (off: the logits of "
                 "the dequantized weights)")
      ->check(CLI::IsMember({"none", "int8"}))
      ->group(group);
  app.add_option("--quantize-group-size", options.quantize_group_size,
                 "inputs per scale: int4 32 or 128 (default 128); int8 0 = per output channel")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->group(group);
  app.add_option("--device-map", options.device_map_path,
                 "use this Hugging Face device-map JSON (validated) instead of planning")
      ->group(group);
}

}  // namespace placer::placement
