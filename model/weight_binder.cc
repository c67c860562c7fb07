#include "model/weight_binder.h"

namespace placer::model {

at::Tensor WeightBinder::Required(const std::string& name) {
  if (!status_.ok()) return {};
  auto tensor = checkpoint_->ReadTensor(name, dtype_, at::Device(at::kCPU));
  if (!tensor.ok()) {
    status_ = tensor.status();
    return {};
  }
  return *tensor;
}

at::Tensor WeightBinder::Optional(const std::string& name) {
  if (checkpoint_->Find(name) == nullptr) return {};
  return Required(name);
}

}  // namespace placer::model
