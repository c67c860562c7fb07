#include "server/request_gate.h"

namespace placer::server {

RequestGate::Ticket RequestGate::TryEnter() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_) return Ticket(nullptr);
  ++in_flight_;
  return Ticket(this);
}

void RequestGate::Leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--in_flight_ == 0) idle_.notify_all();
}

void RequestGate::StartDraining() {
  std::lock_guard<std::mutex> lock(mutex_);
  draining_ = true;
}

bool RequestGate::draining() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return draining_;
}

bool RequestGate::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_until(lock, deadline, [this] { return in_flight_ == 0; });
}

int RequestGate::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_;
}

}  // namespace placer::server
