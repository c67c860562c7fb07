#include "tests/e2e/stage_group.h"

#include <cstring>

namespace placer::testing {

StageGroup::StageGroup(const std::string& model_dir, int stages,
                       const std::vector<std::string>& common,
                       const std::function<std::vector<std::string>(int)>& per_rank) {
  const int rendezvous_port = FreeLoopbackPort();
  for (int rank = 0; rank < stages; ++rank) {
    StageProcess stage;
    stage.ports = PickPorts();
    std::vector<std::string> flags = {"--model", model_dir, "--stages", std::to_string(stages),
                                      "--stage-rank", std::to_string(rank), "--rendezvous",
                                      "127.0.0.1:" + std::to_string(rendezvous_port),
                                      "--stage-listen", "127.0.0.1"};
    flags.insert(flags.end(), common.begin(), common.end());
    if (per_rank) {
      const std::vector<std::string> extra = per_rank(rank);
      flags.insert(flags.end(), extra.begin(), extra.end());
    }
    stage.process = std::make_unique<DaemonProcess>(DaemonArgs(stage.ports, flags));
    ranks_.push_back(std::move(stage));
  }
}

bool StageGroup::WaitServing(std::chrono::milliseconds timeout) {
  for (StageProcess& stage : ranks_) {
    if (!testing::WaitServing(stage.ports, timeout)) return false;
  }
  return true;
}

std::string StageGroup::Logs() const {
  std::string logs;
  for (size_t rank = 0; rank < ranks_.size(); ++rank) {
    logs += "---- rank " + std::to_string(rank) + "\n" + ranks_[rank].process->Log();
  }
  return logs;
}

std::vector<float> ForwardLogits(const StartedDaemon& daemon, const std::vector<int32_t>& tokens) {
  client::PlacerClient client({daemon.target(), std::chrono::seconds(10)});
  v1::ForwardRequest request;
  for (int32_t id : tokens) request.add_token_ids(id);
  request.set_all_positions(true);
  auto response = client.Forward(request);
  if (!response.ok()) return {};
  const std::string& data = response->logits().data();
  std::vector<float> values(data.size() / sizeof(float));
  std::memcpy(values.data(), data.data(), data.size());
  return values;
}

Streamed GenerateStream(const StartedDaemon& daemon, const v1::GenerateRequest& request,
                        const std::function<void()>& on_first) {
  client::PlacerClient client({daemon.target(), std::chrono::seconds(10)});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = client.placer_stub().Generate(&context, request);
  Streamed result;
  bool first = true;
  for (v1::GenerateResponse response; reader->Read(&response);) {
    result.tokens.insert(result.tokens.end(), response.token_ids().begin(),
                         response.token_ids().end());
    if (first && !result.tokens.empty() && on_first) {
      first = false;
      on_first();
    }
  }
  result.status = reader->Finish();
  return result;
}

}  // namespace placer::testing
