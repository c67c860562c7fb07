// The wire between the placerd processes of a pipeline group (DESIGN words: stage), on
// libtorch's torch.distributed: a TCPStore on the leader for the rendezvous (each rank
// publishes what it has, the leader publishes the plan) and a ProcessGroupGloo for the
// activations, point to point. The only translation unit that includes c10d; everything
// else sees this header.
//
// Every wait has a deadline (--stage-timeout): a stage that dies is seen at once (its
// connection closes), one that hangs within the timeout, because a rank with nothing to
// send keeps its next rank alive with heartbeats (StartHeartbeats). Errors are
// UNAVAILABLE naming the stage.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/stage_header.h"

namespace placer::runtime {

struct StageLinkOptions {
  std::string rendezvous;  // "HOST:PORT" of the leader's store (the leader listens on it)
  int rank = 0;
  int size = 1;
  // Address Gloo binds and announces for this rank (--stage-listen), never the hostname's.
  std::string listen_address = "127.0.0.1";
  std::chrono::milliseconds timeout{5000};  // every send and receive between stages
  // How long the ranks may take to all show up (pods start at different times).
  std::chrono::milliseconds rendezvous_timeout{120000};
};

// What travels between stages: a fixed header (kind, step id, shape, dtype) then the layout
// ints and the hidden states, each only when non-empty.
struct StageMessage {
  StageMessageKind kind = StageMessageKind::kStep;
  int64_t step = 0;
  std::vector<int64_t> layout;  // the model's description of the pass's rows
  at::Tensor hidden;            // [rows, width] contiguous host tensor, or undefined
  std::string error;            // kStepFailed: why (in the layout's bytes on the wire)
};

class StageLink {
 public:
  // Rank 0 starts the store on the rendezvous port; everyone connects to it and then to one
  // another (Gloo's full mesh). Waits up to rendezvous_timeout for every rank.
  static absl::StatusOr<std::unique_ptr<StageLink>> Connect(const StageLinkOptions& options);
  ~StageLink();

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // "stage 1 (rank 1 of 3)"
  static std::string StageName(int rank, int size);

  // The rendezvous store: Publish sets a key; Read waits for it up to `timeout`.
  absl::Status Publish(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Read(const std::string& key, std::chrono::milliseconds timeout);

  // Sends one message to `to`; thread-safe (one send at a time per link).
  absl::Status Send(int to, const StageMessage& message);
  // The next message from `from` other than a heartbeat, waiting up to timeout() after each
  // message (a heartbeat restarts the wait). One receiver per peer at a time. The hidden
  // tensor lives in a buffer reused by the next Receive from that peer.
  absl::StatusOr<StageMessage> Receive(int from);

  // Receive hidden states into pinned host memory from now on (a rank computing on a real
  // GPU: the copy onto it then runs at the bus's speed, without blocking the host). Before the
  // first Receive. Receive buffers are host memory either way (runtime/hop_buffer.h).
  void PinReceiveBuffers();
  bool receive_buffers_pinned() const { return pinned_receives_; }

  // Makes Receive return CANCELLED at its next message or deadline (a receiver thread that
  // heartbeats would otherwise keep waiting for good), so its owner can stop it.
  void Close() { closing_ = true; }

  // A thread that sends `to` a heartbeat whenever nothing was sent to it for a third of the
  // timeout, until the link is destroyed (or a send fails).
  void StartHeartbeats(int to);

  // The KV blocks in use on the leader ride in every header, heartbeats too: the workers'
  // pools take no blocks (the leader's block tables come with each step) and report this
  // figure as theirs. `source` gives the figure each message carries (the leader: its pool's);
  // without one a rank passes on what it last received. `on_received` runs on the receiving
  // thread for every header whose figure differs from the last. Both before the first
  // Send / Receive (StartHeartbeats sends).
  void SetKvBlocksInUseSource(std::function<int64_t()> source);
  void OnKvBlocksInUse(std::function<void(int64_t)> on_received);

  // Bytes of steps sent (headers, layouts, hidden states), and time spent in Receive.
  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  double receive_wait_seconds() const { return receive_wait_ns_.load() * 1e-9; }

 private:
  struct Impl;
  explicit StageLink(const StageLinkOptions& options);
  StageLinkOptions options_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> receive_wait_ns_{0};
  std::atomic<bool> closing_{false};
  bool pinned_receives_ = false;
  std::function<int64_t()> kv_blocks_source_;
  std::function<void(int64_t)> on_kv_blocks_;
  std::atomic<int64_t> kv_blocks_received_{0};
};

}  // namespace placer::runtime
