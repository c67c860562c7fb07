#include "model/kv_cache.h"

namespace placer::model {

KvCache::KvCache(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t capacity,
                 at::ScalarType dtype)
    : capacity_(capacity) {
  const auto options = at::TensorOptions().dtype(dtype);
  for (int64_t i = 0; i < layers; ++i) {
    keys_.push_back(at::empty({kv_heads, capacity, head_dim}, options));
    values_.push_back(at::empty({kv_heads, capacity, head_dim}, options));
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
