// What the daemon is serving right now, shared between the loading thread and RPC handlers.
// Readers get an immutable snapshot, so a handler never sees a half-updated model.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/generation_defaults.h"
#include "placement/reserves.h"
#include "runtime/runtime_accounting.h"

namespace placer::model {
class CausalLm;
class GenerationEngine;
}
namespace placer::tokenizer {
class Tokenizer;
}

namespace placer::server {

enum class ModelState { kNone, kLoading, kReady, kFailed };

const char* ModelStateName(ModelState state);

struct ModelSnapshot {
  ModelState state = ModelState::kNone;
  std::string path;
  std::string architecture;
  std::string dtype;          // the checkpoint's
  std::string compute_dtype;  // --dtype
  uint64_t parameter_count = 0;
  std::string error;  // why loading failed, when state is kFailed
  bool has_tokenizer = false;  // a usable tokenizer: `tokenizer` is set
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  // Why the checkpoint's tokenizer.json cannot be used (the model still serves token ids).
  std::string tokenizer_error;
  model::GenerationDefaults generation;  // from generation_config.json
  // Module -> device as Hugging Face writes it ("0", "cpu", "disk"), in execution order.
  std::vector<std::pair<std::string, std::string>> device_map;
  struct DeviceFigures {
    std::string name;
    uint64_t total_bytes = 0, free_bytes = 0, weights_bytes = 0, kv_cache_bytes = 0,
             reserved_bytes = 0;
  };
  std::vector<DeviceFigures> devices;
  struct OffloadExecution {
    std::string mode, device, reason;
    uint32_t staging_slots = 0;
    std::vector<std::string> blocks;
  };
  OffloadExecution offload_execution;  // where blocks off the GPUs run (the plan's choice)
  struct Quantization {
    std::string source;  // "" (nothing quantized), "checkpoint" or "--quantize"
    std::string summary, activations;
  };
  Quantization quantization;
  // What the plan was sized for and the engine must run within (set when ready).
  placement::ServingLimits limits;
  std::shared_ptr<const model::CausalLm> model;  // set when state is kReady
  // Runs every Generate of this model in shared forward passes (set when state is kReady).
  std::shared_ptr<model::GenerationEngine> engine;
  // Live per-device memory by kind and offload traffic of the served model (set when ready).
  std::shared_ptr<const runtime::RuntimeAccounting> accounting;
  double load_seconds = 0;  // from opening the checkpoint to ready
  double warm_up_seconds = 0;  // --warm-up's forward pass (part of load_seconds); 0 without it
};

class ModelSlot {
 public:
  ModelSlot() : current_(std::make_shared<const ModelSnapshot>()) {}

  std::shared_ptr<const ModelSnapshot> Get() const;
  void Set(ModelSnapshot snapshot);

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const ModelSnapshot> current_;
};

}  // namespace placer::server
