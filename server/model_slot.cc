#include "server/model_slot.h"

namespace placer::server {

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kNone:
      return "none";
    case ModelState::kLoading:
      return "loading";
    case ModelState::kReady:
      return "ready";
    case ModelState::kFailed:
      return "failed";
  }
  return "unknown";
}

std::shared_ptr<const ModelSnapshot> ModelSlot::Get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

void ModelSlot::Set(ModelSnapshot snapshot) {
  auto next = std::make_shared<const ModelSnapshot>(std::move(snapshot));
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = std::move(next);
}

}  // namespace placer::server
