#include "bench/grpc_clients.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "client/placer_client.h"

namespace placer::bench {
namespace {

// Holds every client thread until all are connected, then lets them go at one instant.
class StartLine {
 public:
  explicit StartLine(int parties) : waiting_(parties) {}
  Clock::time_point Arrive() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--waiting_ == 0) {
      start_ = Clock::now();
      changed_.notify_all();
    } else {
      changed_.wait(lock, [this] { return waiting_ == 0; });
    }
    return start_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_;
  Clock::time_point start_;
};

std::unique_ptr<client::PlacerClient> Connect(const std::string& target) {
  auto placer = std::make_unique<client::PlacerClient>(
      client::ClientOptions(target, std::chrono::milliseconds(600000)));
  (void)placer->CheckHealth();  // opens the connection before the clock starts
  return placer;
}

std::string FirstError(const std::vector<absl::Status>& errors) {
  for (const absl::Status& error : errors) {
    if (!error.ok()) return std::string(error.message());
  }
  return "";
}

}  // namespace

absl::StatusOr<nlohmann::json> RunGenerateStreams(const StreamArgs& args) {
  const auto streams = static_cast<size_t>(args.streams);
  std::vector<double> ttft(streams, -1), finished(streams, 0);
  std::vector<std::vector<double>> steps(streams);
  std::vector<std::vector<int32_t>> tokens(streams);
  std::vector<absl::Status> errors(streams);
  StartLine line(args.streams);
  std::vector<std::thread> threads;
  for (size_t s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      auto placer = Connect(args.target);
      v1::GenerateRequest request;
      for (int32_t id : PromptTokens(args.prompt_tokens, args.vocab,
                                     args.variant * 1000 + static_cast<int>(s))) {
        request.add_prompt_token_ids(id);
      }
      request.mutable_params()->set_max_new_tokens(static_cast<uint32_t>(args.new_tokens));
      request.mutable_params()->set_temperature(args.temperature);
      if (args.temperature > 0) {
        request.mutable_params()->set_top_p(args.top_p);
        request.mutable_params()->set_top_k(args.top_k);
        request.mutable_params()->set_seed(1000 + s);
      }
      request.mutable_params()->set_ignore_eos(true);
      const Clock::time_point start = line.Arrive();
      Clock::time_point last = start;
      errors[s] = placer->Generate(request, [&](const v1::GenerateResponse& response) {
        if (response.token_ids_size() == 0) return;
        const Clock::time_point now = Clock::now();
        if (tokens[s].empty()) {
          ttft[s] = Seconds(start, now);
        } else {
          steps[s].push_back(Seconds(last, now));
        }
        last = now;
        for (int32_t id : response.token_ids()) tokens[s].push_back(id);
      });
      finished[s] = Seconds(start, Clock::now());
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (const std::string error = FirstError(errors); !error.empty()) {
    return absl::InternalError(absl::StrCat("Generate failed: ", error));
  }
  size_t total = 0;
  std::vector<double> all_steps;
  for (size_t s = 0; s < streams; ++s) {
    total += tokens[s].size();
    all_steps.insert(all_steps.end(), steps[s].begin(), steps[s].end());
  }
  const double wall = *std::max_element(finished.begin(), finished.end());
  return nlohmann::json{{"streams", args.streams},
                        {"prompt_tokens", args.prompt_tokens},
                        {"new_tokens", args.new_tokens},
                        {"completion_tokens", total},
                        {"wall_seconds", wall},
                        {"aggregate_tokens_per_second", static_cast<double>(total) / wall},
                        {"ttft_seconds", ttft},
                        {"ttft", Summary(ttft)},
                        {"stream_seconds", finished},
                        {"step", Summary(all_steps)},
                        {"step_seconds", steps},
                        {"tokens", tokens}};
}

absl::StatusOr<nlohmann::json> RunUnaryForward(const UnaryArgs& args) {
  const auto clients = static_cast<size_t>(args.clients);
  std::vector<std::vector<double>> latencies(clients);
  std::vector<absl::Status> errors(clients);
  v1::ForwardRequest request;
  for (int32_t id : PromptTokens(args.tokens, args.vocab)) request.add_token_ids(id);
  StartLine line(args.clients);
  std::vector<double> finished(clients, 0);
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto placer = Connect(args.target);
      for (int i = 0; i < std::max(5, args.iterations / 20); ++i) {
        if (auto warm = placer->Forward(request); !warm.ok()) {
          errors[c] = warm.status();
          line.Arrive();
          return;
        }
      }
      const Clock::time_point start = line.Arrive();
      for (int i = 0; i < args.iterations; ++i) {
        const Clock::time_point call = Clock::now();
        auto response = placer->Forward(request);
        if (!response.ok()) {
          errors[c] = response.status();
          break;
        }
        latencies[c].push_back(Seconds(call, Clock::now()));
      }
      finished[c] = Seconds(start, Clock::now());
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (const std::string error = FirstError(errors); !error.empty()) {
    return absl::InternalError(absl::StrCat("Forward failed: ", error));
  }
  std::vector<double> all;
  for (const auto& per_client : latencies) all.insert(all.end(), per_client.begin(), per_client.end());
  const double wall = *std::max_element(finished.begin(), finished.end());
  return nlohmann::json{{"tokens", args.tokens},
                        {"clients", args.clients},
                        {"latency_seconds", all},
                        {"latency", Summary(all)},
                        {"wall_seconds", wall},
                        {"requests_per_second", static_cast<double>(all.size()) / wall}};
}

}  // namespace placer::bench
