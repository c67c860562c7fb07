// The one rule every GPU test follows: without a CUDA device it is SKIPPED with the reason,
// never passed. A build without CUDA (Debian's libtorch is CPU-only) and a CUDA build on a
// machine without a GPU are told apart, so a skip on the GPU machine itself stands out.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "placement/cuda_probe.h"

namespace placer::testing {

// Empty when a CUDA device can be used; otherwise why not.
inline std::string GpuUnavailableReason() {
  if (!placement::BuiltWithCuda()) {
    return "placer was built without CUDA (libtorch has no CUDA libraries, or no CUDA toolkit "
           "was found): scripts/gpu-check runs these on a GPU machine";
  }
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    return "built with CUDA, but no CUDA device is visible (driver or CUDA_VISIBLE_DEVICES)";
  }
  return "";
}

}  // namespace placer::testing

#define PLACER_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                             \
    const std::string placer_gpu_reason = ::placer::testing::GpuUnavailableReason(); \
    if (!placer_gpu_reason.empty()) GTEST_SKIP() << placer_gpu_reason;             \
  } while (0)
