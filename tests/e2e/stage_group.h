// A pipeline group of real placerd processes on loopback for the stage tests: rank 0 (the
// leader, serving the APIs) and the workers, each with its own --devices, all joined through
// a rendezvous port; and a single placerd over the same checkpoint to compare with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {

struct StageProcess {
  StartedDaemon ports;
  std::unique_ptr<DaemonProcess> process;
};

class StageGroup {
 public:
  // Starts `stages` ranks over `model_dir`; `per_rank(rank)` adds flags to one rank (a
  // mismatch test gives one rank another --dtype). Does not wait for them.
  StageGroup(const std::string& model_dir, int stages, const std::vector<std::string>& common,
             const std::function<std::vector<std::string>(int)>& per_rank = nullptr);
  // True once every rank reports SERVING.
  bool WaitServing(std::chrono::milliseconds timeout);
  StageProcess& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  const StartedDaemon& leader() const { return ranks_[0].ports; }
  std::string Logs() const;

 private:
  std::vector<StageProcess> ranks_;
};

// Logits of every position of `tokens` over gRPC Forward.
std::vector<float> ForwardLogits(const StartedDaemon& daemon, const std::vector<int32_t>& tokens);

struct Streamed {
  std::vector<int32_t> tokens;
  grpc::Status status;
};
// A whole Generate stream; `on_first` runs once, after the first token arrived.
Streamed GenerateStream(const StartedDaemon& daemon, const v1::GenerateRequest& request,
                        const std::function<void()>& on_first = nullptr);

}  // namespace placer::testing
