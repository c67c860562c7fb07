#include "runtime/staging_stream.h"

#if PLACER_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#endif

namespace placer::runtime {

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

struct SlotFence::State {
  std::optional<at::cuda::CUDAEvent> compute_done;
};

SlotFence::SlotFence() : state_(std::make_unique<State>()) {}
SlotFence::~SlotFence() = default;
SlotFence::SlotFence(SlotFence&&) noexcept = default;
SlotFence& SlotFence::operator=(SlotFence&&) noexcept = default;

void SlotFence::Record(const at::Device& device) {
  if (!device.is_cuda()) return;
  if (!state_->compute_done) state_->compute_done.emplace();
  state_->compute_done->record(c10::cuda::getCurrentCUDAStream(device.index()));
}

void SlotFence::WaitOnCurrentStream(const at::Device& device) {
  if (!device.is_cuda() || !state_->compute_done) return;
  // Inside a StagingStreamScope the current stream is the staging side stream.
  state_->compute_done->block(c10::cuda::getCurrentCUDAStream(device.index()));
}

#else

struct StagingStreamScope::State {};

StagingStreamScope::StagingStreamScope(const at::Device&) {}
StagingStreamScope::~StagingStreamScope() = default;
void StagingStreamScope::WaitForCopies() {}
struct SlotFence::State {};

SlotFence::SlotFence() : state_(std::make_unique<State>()) {}
SlotFence::~SlotFence() = default;
SlotFence::SlotFence(SlotFence&&) noexcept = default;
SlotFence& SlotFence::operator=(SlotFence&&) noexcept = default;
void SlotFence::Record(const at::Device&) {}
void SlotFence::WaitOnCurrentStream(const at::Device&) {}

#endif

}  // namespace placer::runtime
