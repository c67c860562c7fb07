// Admission of Placer RPCs, so that draining can refuse new work and wait for the work it
// already accepted. gRPC's own Shutdown would also wait on long-lived health watches.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace placer::server {

class RequestGate {
 public:
  // Holds one admitted RPC; leaving scope releases it.
  class Ticket {
   public:
    explicit Ticket(RequestGate* gate) : gate_(gate) {}
    Ticket(Ticket&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (gate_ != nullptr) gate_->Leave();
    }
    bool admitted() const { return gate_ != nullptr; }

   private:
    RequestGate* gate_;
  };

  // An admitted ticket, or an empty one once draining has begun.
  Ticket TryEnter();

  void StartDraining();
  bool draining() const;

  // True when every admitted RPC has left before the deadline.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

  int in_flight() const;

  // After the drain timeout: long-running RPCs poll this and end themselves with UNAVAILABLE,
  // so a client learns why its stream stopped instead of seeing a bare cancellation.
  void CancelRemaining() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  void Leave();

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  int in_flight_ = 0;
  bool draining_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace placer::server
