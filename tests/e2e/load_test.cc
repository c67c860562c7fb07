// 32 concurrent clients mixing valid, invalid, cancelled and over-deadline requests against a
// real placerd for a minute: every answer is a valid result or the expected status, the daemon
// stays up, KV caches all come back, RSS does not grow. SIGTERM under such a load:
// drain_test.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"
#include "tests/e2e/load_clients.h"

namespace placer::testing {
namespace {

using namespace load;  // NOLINT: ReadStream, Tally, the Load fixture
using std::chrono::milliseconds;
using std::chrono::seconds;

// One client's loop until `stop`: a random mix of request kinds, each checked.
void Client(const std::string& target, int seed, const std::atomic<bool>& stop, Tally& tally) {
  std::mt19937 random(seed);
  client::PlacerClient client({target, seconds(30)});
  // A full queue is an expected answer under this load.
  auto busy = [&](grpc::StatusCode code) {
    return code == grpc::StatusCode::RESOURCE_EXHAUSTED;
  };
  while (!stop) {
    const int kind = static_cast<int>(random() % 6);
    grpc::ClientContext context;
    v1::GenerateRequest request;
    request.add_prompt_token_ids(1 + static_cast<int>(random() % 200));
    request.add_prompt_token_ids(7);
    request.mutable_params()->set_max_new_tokens(4 + random() % 12);
    request.mutable_params()->set_ignore_eos(true);
    std::string name;
    if (kind == 0) {
      name = "valid";
      context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    } else if (kind == 1) {
      name = "text";
      request.clear_prompt_token_ids();
      request.set_prompt("Hello, placer! Résumé 🙂");
      request.mutable_params()->add_stop("e");
      context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    } else if (kind == 2) {
      name = "invalid";
      switch (random() % 3) {
        case 0: request.mutable_params()->set_top_p(1.5f); break;
        case 1: request.add_prompt_token_ids(1 << 24); break;
        default: request.set_prompt("both"); break;
      }
    } else if (kind == 3) {
      name = "cancelled";
      request.mutable_params()->set_max_new_tokens(200);
    } else if (kind == 4) {
      name = "deadline";
      request.mutable_params()->set_max_new_tokens(500);
      context.set_deadline(std::chrono::system_clock::now() + milliseconds(30 + random() % 50));
    } else {
      name = "forward";
      v1::ForwardRequest forward;
      forward.add_token_ids(3);
      if (random() % 2) forward.add_token_ids(-1);
      v1::ForwardResponse response;
      grpc::ClientContext forward_context;
      forward_context.set_deadline(std::chrono::system_clock::now() + seconds(30));
      const grpc::Status status =
          client.placer_stub().Forward(&forward_context, forward, &response);
      const bool valid = forward.token_ids_size() == 1;
      const bool ok = valid ? (status.ok() && response.logits().shape_size() == 2)
                            : status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
      tally.Add(name, status.error_code(), status.error_message(),
                ok || busy(status.error_code()));
      continue;
    }
    const auto [status, messages, finish_reason] =
        ReadStream(client, context, request, /*cancel_after=*/name == "cancelled" ? 2 : 0);
    const grpc::StatusCode code = status.error_code();
    bool expected = false;
    if (name == "valid") {
      expected = status.ok() && finish_reason == "length";
    } else if (name == "text") {
      expected = status.ok() && (finish_reason == "stop" || finish_reason == "length");
    } else if (name == "invalid") {
      expected = code == grpc::StatusCode::INVALID_ARGUMENT;
    } else if (name == "cancelled") {
      expected = code == grpc::StatusCode::CANCELLED || status.ok();
    } else {
      expected = code == grpc::StatusCode::DEADLINE_EXCEEDED || status.ok();
    }
    tally.Add(name, code, status.error_message(), expected || busy(code));
  }
}

TEST_F(Load, ThirtyTwoClientsForAMinute) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--max-seq-len", "1024",
                                          "--max-batch-size", "8", "--max-queue", "16",
                                          "--drain-timeout", "5s", "--threads", "1"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();

  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back(Client, ports.target(), i, std::cref(stop), std::ref(tally));
  }
  std::this_thread::sleep_for(seconds(20));
  const std::optional<double> rss_warm =
      ScrapeValue(ports.metrics_port, "process_resident_memory_bytes");
  std::this_thread::sleep_for(seconds(40));
  stop = true;
  for (std::thread& client : clients) client.join();
  const std::optional<double> rss_end =
      ScrapeValue(ports.metrics_port, "process_resident_memory_bytes");

  EXPECT_TRUE(daemon.running()) << daemon.Log();
  EXPECT_TRUE(tally.unexpected().empty())
      << tally.Unexpected() << tally.Summary();
  EXPECT_GT(tally.total(), 200) << tally.Summary();
  // Every sequence gave its KV-cache blocks back, and nothing is left running or queued.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return ScrapeValue(ports.metrics_port, "placer_device_kv_cache_blocks",
                      {{"device", "cpu"}, {"state", "used"}}) == 0.0 &&
               ScrapeValue(ports.metrics_port, "placer_device_kv_cache_blocks",
                      // 8 sequences of the tiny model's 512 positions (--max-seq-len 1024
                      // is capped at its context), in blocks of 16.
                      {{"device", "cpu"}, {"state", "free"}}) == 8.0 * 512 / 16 &&
               ScrapeValue(ports.metrics_port, "placer_running_sequences") == 0.0 &&
               ScrapeValue(ports.metrics_port, "placer_queue_depth") == 0.0;
      },
      seconds(10)))
      << tally.Summary();
  ASSERT_TRUE(rss_warm.has_value() && rss_end.has_value());
  EXPECT_LT(*rss_end, *rss_warm * 1.25 + 32.0 * (1 << 20))
      << "RSS grew from " << *rss_warm << " to " << *rss_end << " under steady load";

  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.WaitExit(seconds(30)).value_or(-1), 0) << daemon.Log();
}

}  // namespace
}  // namespace placer::testing
