#include "placement/staging_stream.h"

#if PLACER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#endif

namespace placer::placement {

#if PLACER_WITH_CUDA

struct StagingStreamScope::State {
  std::optional<c10::cuda::CUDAStream> stream;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

StagingStreamScope::StagingStreamScope(const at::Device& device)
    : state_(std::make_unique<State>()) {
  if (!device.is_cuda()) return;
  state_->stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  state_->guard.emplace(*state_->stream);
}

StagingStreamScope::~StagingStreamScope() = default;

void StagingStreamScope::WaitForCopies() {
  if (state_->stream) state_->stream->synchronize();
}

void UseOnComputeStream(const BlockWeights& weights) {
  for (const at::Tensor& tensor : weights) {
    if (!tensor.defined() || !tensor.is_cuda()) continue;
    c10::cuda::CUDACachingAllocator::recordStream(
        tensor.storage().data_ptr(), c10::cuda::getCurrentCUDAStream(tensor.device().index()));
  }
}

#else

struct StagingStreamScope::State {};

StagingStreamScope::StagingStreamScope(const at::Device&) {}
StagingStreamScope::~StagingStreamScope() = default;
void StagingStreamScope::WaitForCopies() {}
void UseOnComputeStream(const BlockWeights&) {}

#endif

}  // namespace placer::placement
