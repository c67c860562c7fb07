#include "model/kv_cache.h"

namespace placer::model {
namespace {

int64_t Bytes(const at::Tensor& tensor) {
  return static_cast<int64_t>(tensor.numel() * tensor.element_size());
}

}  // namespace

KvCache::KvCache(std::vector<LayerPlacement> layers, int64_t kv_heads, int64_t head_dim,
                 int64_t capacity, at::ScalarType dtype, placement::RuntimeAccounting* accounting)
    : layers_(std::move(layers)), capacity_(capacity), accounting_(accounting) {
  for (const LayerPlacement& layer : layers_) {
    const auto options = at::TensorOptions().dtype(dtype).device(layer.device);
    keys_.push_back(at::empty({kv_heads, capacity, head_dim}, options));
    values_.push_back(at::empty({kv_heads, capacity, head_dim}, options));
    if (accounting_ != nullptr) {
      accounting_->AddMemory(layer.device_name, placement::MemoryKind::kKvCache,
                             Bytes(keys_.back()) + Bytes(values_.back()));
    }
  }
}

KvCache::~KvCache() {
  if (accounting_ == nullptr) return;
  for (size_t i = 0; i < layers_.size(); ++i) {
    accounting_->AddMemory(layers_[i].device_name, placement::MemoryKind::kKvCache,
                           -(Bytes(keys_[i]) + Bytes(values_[i])));
  }
}

std::pair<at::Tensor, at::Tensor> KvCache::Append(int64_t layer, const at::Tensor& k,
                                                  const at::Tensor& v) {
  const int64_t tokens = k.size(1);
  keys_[layer].narrow(1, length_, tokens).copy_(k);
  values_[layer].narrow(1, length_, tokens).copy_(v);
  return {keys_[layer].narrow(1, 0, length_ + tokens),
          values_[layer].narrow(1, 0, length_ + tokens)};
}

}  // namespace placer::model
