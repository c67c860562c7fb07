// Keys and values of one sequence, per decoder layer on that layer's execution device,
// preallocated for the sequence's whole length so that decoding a token appends in place
// instead of copying the past. Its bytes are charged to the devices while it lives.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "placement/runtime_accounting.h"

namespace placer::model {

class KvCache final : public SequenceCache {
 public:
  struct LayerPlacement {
    at::Device device;
    std::string device_name;  // placer's name ("cuda:1") for accounting
  };

  KvCache(std::vector<LayerPlacement> layers, int64_t kv_heads, int64_t head_dim,
          int64_t capacity, at::ScalarType dtype, placement::RuntimeAccounting* accounting);
  ~KvCache() override;

  int64_t length() const override { return length_; }
  int64_t capacity() const override { return capacity_; }

  // Writes this step's keys/values ([kv_heads, T, head_dim], on the layer's device) at
  // positions length()..+T-1 of `layer` and returns all keys/values so far. Commit()
  // advances length() once every layer has appended.
  std::pair<at::Tensor, at::Tensor> Append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  void Commit(int64_t tokens) { length_ += tokens; }

 private:
  std::vector<LayerPlacement> layers_;
  std::vector<at::Tensor> keys_;
  std::vector<at::Tensor> values_;
  int64_t capacity_;
  int64_t length_ = 0;
  placement::RuntimeAccounting* accounting_;
};

}  // namespace placer::model
