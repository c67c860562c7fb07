// SIGTERM under load (the load tests' clients, load_clients.h): every admitted stream finishes
// or is told why, new requests are refused, health goes NOT_SERVING first, and the daemon exits
// 0 in time.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "client/placer_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/load_clients.h"

namespace placer::testing {
namespace {

using namespace load;  // NOLINT: ReadStream, Tally, the Load fixture
using std::chrono::milliseconds;
using std::chrono::seconds;

// SIGTERM under load: what one client's requests ended with, judged against the drain rules.
struct DrainObservations {
  using Clock = std::chrono::steady_clock;
  std::atomic<Clock::rep> not_serving_at{Clock::time_point::max().time_since_epoch().count()};
  std::atomic<int> finished_during_drain{0};  // completed normally after the signal
  std::atomic<int> cut_by_timeout{0};         // UNAVAILABLE after --drain-timeout
  std::atomic<int> cancelled_by_grpc_at_shutdown{0};
  std::atomic<bool> checked_health{false};
  std::atomic<int> health_after_refusal{-1};  // client::Health of a Check after a refusal
};

void DrainClient(const std::string& target, int seed, const std::atomic<bool>& stop,
                 const std::atomic<bool>& signalled, DrainObservations& seen, Tally& tally) {
  using Clock = DrainObservations::Clock;
  std::mt19937 random(seed);
  client::PlacerClient client({target, seconds(30)});
  while (!stop) {
    const int kind = static_cast<int>(random() % 5);
    const std::string name = kind == 0   ? "short"
                             : kind == 1 ? "long"
                             : kind == 2 ? "text"
                             : kind == 3 ? "invalid"
                                         : "cancelled";
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    v1::GenerateRequest request;
    request.add_prompt_token_ids(1 + static_cast<int>(random() % 200));
    request.mutable_params()->set_ignore_eos(true);
    request.mutable_params()->set_max_new_tokens(kind == 1 ? 250 + random() % 200
                                                           : 4 + random() % 12);
    if (kind == 2) {
      request.clear_prompt_token_ids();
      request.set_prompt("Hello, placer! R\xc3\xa9sum\xc3\xa9");
    } else if (kind == 3) {
      request.mutable_params()->set_top_p(1.5f);
    }
    const bool before_signal = !signalled;
    const Clock::time_point started = Clock::now();
    const auto [status, messages, finish_reason] =
        ReadStream(client, context, request, /*cancel_after=*/name == "cancelled" ? 2 : 0);
    const grpc::StatusCode code = status.error_code();
    const std::string& message = status.error_message();
    const bool refused = code == grpc::StatusCode::UNAVAILABLE && messages == 0;
    const bool cut = code == grpc::StatusCode::UNAVAILABLE &&
                     message.find("--drain-timeout") != std::string::npos;
    // Health went NOT_SERVING before the gate closed: a Check after a refusal must not say
    // SERVING (asked once, as soon as the first refusal for draining comes back).
    if (refused && message.find("draining") != std::string::npos &&
        !seen.checked_health.exchange(true)) {
      client::PlacerClient checker({target, seconds(5)});
      const absl::StatusOr<client::Health> health = checker.CheckHealth("placer.v1.Placer");
      seen.health_after_refusal =
          health.ok() ? static_cast<int>(*health) : static_cast<int>(client::Health::kNotServing);
    }
    // Well after health said NOT_SERVING, every request is refused (or finds no listener).
    const Clock::rep not_serving_at = seen.not_serving_at.load();
    const bool known_not_serving =
        not_serving_at != Clock::time_point::max().time_since_epoch().count();
    const auto started_after_not_serving = [&](milliseconds by) {
      return known_not_serving &&
             started > Clock::time_point(Clock::duration(not_serving_at)) + by;
    };
    // gRPC core itself cancels a call that reaches the server after Server::Shutdown began and
    // before the client read the GOAWAY: it never gets to placerd's handlers (see
    // server/README.md, "Draining"). Shutdown begins as soon as the drain is idle, which can be
    // any moment after NOT_SERVING, and a request started after the watcher saw NOT_SERVING
    // finds the gate closed (the daemon closes it right after flipping health), so it can never
    // be an admitted stream ending without a word. Counted, not hidden.
    const bool at_listener_close = started_after_not_serving(milliseconds(0)) &&
                                   code == grpc::StatusCode::CANCELLED && messages == 0;
    if (at_listener_close) ++seen.cancelled_by_grpc_at_shutdown;
    bool expected = false;
    if (at_listener_close) {
      expected = true;
    } else if (started_after_not_serving(milliseconds(300))) {
      // Never admitted (the gate had closed long before): refused with a reason.
      expected = code == grpc::StatusCode::UNAVAILABLE && !message.empty();
    } else if (code == grpc::StatusCode::UNAVAILABLE) {
      // Refused at the door, cut after --drain-timeout with a reason, or no listener any more;
      // never an admitted stream ending without a word.
      expected = !message.empty() && (messages == 0 || cut);
    } else if (code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      expected = messages == 0;  // the queue was full
    } else if (name == "invalid") {
      expected = code == grpc::StatusCode::INVALID_ARGUMENT;
    } else if (name == "cancelled" && code == grpc::StatusCode::CANCELLED) {
      expected = messages >= 2;
    } else {
      const bool full = name != "text" && finish_reason == "length";
      expected = status.ok() && (full || (name == "text" && !finish_reason.empty()));
    }
    if (status.ok() && before_signal && signalled) ++seen.finished_during_drain;
    if (cut) ++seen.cut_by_timeout;
    // When, against the moment health turned NOT_SERVING (that is, draining began).
    const auto since_not_serving = [&](Clock::time_point at) -> std::string {
      if (not_serving_at == Clock::time_point::max().time_since_epoch().count()) return "?";
      return std::to_string(std::chrono::duration_cast<milliseconds>(
                                at - Clock::time_point(Clock::duration(not_serving_at)))
                                .count()) + " ms";
    };
    tally.Add(name + (before_signal ? "" : " (signalled)"), code,
              message + " after " + std::to_string(messages) + " message(s), started " +
                  since_not_serving(started) + ", ended " + since_not_serving(Clock::now()) +
                  " from NOT_SERVING",
              expected);
    if (code == grpc::StatusCode::UNAVAILABLE) std::this_thread::sleep_for(milliseconds(20));
  }
}

TEST_F(Load, SigtermUnderLoadDrainsAsDescribed) {
  constexpr auto kDrainTimeout = seconds(2);
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", dir_.string(), "--max-seq-len", "1024",
                                          "--max-batch-size", "8", "--max-queue", "16",
                                          "--drain-timeout", "2s", "--threads", "1"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();

  DrainObservations seen;
  // A watcher on its own channel, as a load balancer would have.
  std::thread watcher([&] {
    client::PlacerClient client({ports.target(), seconds(60)});
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(60));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("placer.v1.Placer");
    auto watch = client.health_stub().Watch(&context, request);
    grpc::health::v1::HealthCheckResponse response;
    bool was_serving = false;
    while (watch->Read(&response)) {
      const bool serving =
          response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      if (was_serving && !serving) {
        seen.not_serving_at = DrainObservations::Clock::now().time_since_epoch().count();
      }
      was_serving = was_serving || serving;
    }
    watch->Finish();
  });

  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<bool> signalled{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 24; ++i) {
    clients.emplace_back(DrainClient, ports.target(), 100 + i, std::cref(stop),
                         std::cref(signalled), std::ref(seen), std::ref(tally));
  }
  std::this_thread::sleep_for(seconds(4));
  const int before = tally.total();
  signalled = true;
  const auto signal_time = DrainObservations::Clock::now();
  daemon.Signal(SIGTERM);
  const std::optional<int> exit_code = daemon.WaitExit(seconds(30));
  const auto exit_seconds =
      std::chrono::duration<double>(DrainObservations::Clock::now() - signal_time).count();
  // A moment for clients to see the closed listener, then stop them.
  std::this_thread::sleep_for(milliseconds(300));
  stop = true;
  for (std::thread& client : clients) client.join();
  watcher.join();

  EXPECT_EQ(exit_code.value_or(-1), 0) << daemon.Log();
  // The drain timeout, one decode step to cancel, gRPC's 1 s for statuses, and exit itself.
  EXPECT_LT(exit_seconds, std::chrono::duration<double>(kDrainTimeout).count() + 4.0)
      << daemon.Log();
  EXPECT_GT(before, 20) << tally.Summary();
  EXPECT_TRUE(tally.unexpected().empty()) << tally.Unexpected() << tally.Summary();
  EXPECT_NE(seen.not_serving_at.load(),
            DrainObservations::Clock::time_point::max().time_since_epoch().count())
      << "the health watch never turned NOT_SERVING";
  EXPECT_TRUE(seen.checked_health) << "no request was refused for draining\n" << tally.Summary();
  EXPECT_EQ(seen.health_after_refusal, static_cast<int>(client::Health::kNotServing));
  // Streams running at the signal finished during the drain.
  EXPECT_GT(seen.finished_during_drain, 0) << tally.Summary();
  EXPECT_NE(daemon.Log().find("draining:"), std::string::npos) << daemon.Log();
  std::cout << "exit " << exit_seconds << " s after SIGTERM; " << seen.finished_during_drain
            << " stream(s) finished during the drain, " << seen.cut_by_timeout
            << " cut after --drain-timeout; " << seen.cancelled_by_grpc_at_shutdown
            << " new request(s) cancelled by gRPC as the listener closed\n"
            << tally.Summary();
}

}  // namespace
}  // namespace placer::testing
