// What the daemon is serving right now, shared between the loading thread and RPC handlers.
// Readers get an immutable snapshot, so a handler never sees a half-updated model.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace placer::server {

// kIndexed: the checkpoint is open and validated, but this build has no runtime to execute
// it, so the daemon describes it and stays NOT_SERVING.
enum class ModelState { kNone, kLoading, kIndexed, kReady, kFailed };

const char* ModelStateName(ModelState state);

struct ModelSnapshot {
  ModelState state = ModelState::kNone;
  std::string path;
  std::string architecture;
  std::string dtype;
  uint64_t parameter_count = 0;
  std::string error;  // why loading failed, when state is kFailed
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
