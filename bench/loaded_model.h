// A checkpoint loaded in process as placerd would load it, for placer-bench-model's
// measurements: placerd's placement, quantization and dtype flags (ModelArgs), the bytes one
// decode step reads, and the fields every report of a loaded model starts with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "loader/dtype.h"
#include "model/causal_lm.h"
#include "runtime/runtime_accounting.h"

namespace placer::bench {

struct ModelArgs {
  std::string dir;
  std::string layout = "cpu";
  int threads = 2;
  bool no_prefetch = false;
  std::string offload_dir;
  std::string quantize = "none";  // --quantize, as placerd's
  int64_t quantize_group_size = 0;
  std::string quantize_lm_head = "none";
  std::string quantize_activations = "none";
  std::string dtype = "auto";  // --dtype, as placerd's (F16 computes as BF16 on the CPU)
};

struct LoadedModel {
  std::unique_ptr<model::CausalLm> model;
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  double load_seconds = 0;
  int64_t weight_bytes = 0;       // every tensor of the checkpoint
  int64_t decode_read_bytes = 0;  // weights one decode step reads (one embedding row; packed)
  loader::DType compute_dtype = loader::DType::kF32;
};

// Sets the compute threads, then loads args.dir under args.layout (bench_layouts.h) with
// placerd's --quantize* and --dtype; an error names the flag or file at fault.
absl::StatusOr<LoadedModel> Load(const ModelArgs& args);

// Bytes copied from cpu or disk onto the GPU: the staged weights, plus the 8-byte token id of
// each step that enters the first block on the execution device.
uint64_t StagedBytes(const runtime::RuntimeAccounting& accounting);

// What was loaded and how: the first fields of every report about `loaded`.
nlohmann::json BaseReport(const ModelArgs& args, const LoadedModel& loaded);

}  // namespace placer::bench
