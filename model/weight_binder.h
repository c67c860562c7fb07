// Reads the tensors an architecture needs from the checkpoint, in the compute dtype, and
// remembers the first failure so model constructors stay linear.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "loader/checkpoint.h"

namespace placer::model {

class WeightBinder {
 public:
  WeightBinder(std::shared_ptr<const loader::Checkpoint> checkpoint, at::ScalarType dtype)
      : checkpoint_(std::move(checkpoint)), dtype_(dtype) {}

  // The named tensor; an undefined tensor (and a recorded error) when it cannot be read.
  at::Tensor Required(const std::string& name);
  // The named tensor, or an undefined tensor when the checkpoint does not have it.
  at::Tensor Optional(const std::string& name);

  const absl::Status& status() const { return status_; }
  const loader::Checkpoint& checkpoint() const { return *checkpoint_; }

 private:
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  at::ScalarType dtype_;
  absl::Status status_;
};

}  // namespace placer::model
