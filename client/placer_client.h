// A blocking client for placerd, used by the `placer` CLI and the end-to-end tests.
// Every call has a deadline, so an unreachable daemon costs at most `timeout`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/client_credentials.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "placer/v1/placer.grpc.pb.h"

namespace placer::client {

enum class Health { kServing, kNotServing, kUnknown };

struct ClientOptions {
  // A constructor rather than an aggregate, so `{target, timeout}` stays valid as fields grow.
  ClientOptions() = default;
  ClientOptions(std::string target_, std::chrono::milliseconds timeout_)
      : target(std::move(target_)), timeout(timeout_) {}

  std::string target = "127.0.0.1:50051";
  std::chrono::milliseconds timeout{5000};
  ClientCredentials credentials;  // default: plaintext, no token
};

class PlacerClient {
 public:
  explicit PlacerClient(const ClientOptions& options);

  // Health of `service` ("" for the whole daemon, "placer.v1.Placer" for the API).
  absl::StatusOr<Health> CheckHealth(const std::string& service = "");
  absl::StatusOr<v1::ModelInfo> GetModelInfo();
  absl::StatusOr<v1::ForwardResponse> Forward(const v1::ForwardRequest& request);
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request);
  // Streams the answer, calling `on_response` for every message as it arrives; the whole
  // stream shares the client's timeout as its deadline.
  absl::Status Generate(const v1::GenerateRequest& request,
                        const std::function<void(const v1::GenerateResponse&)>& on_response);

  // The raw stubs, for streaming calls and tests that need a ClientContext of their own.
  v1::Placer::Stub& placer_stub() { return *placer_; }
  grpc::health::v1::Health::Stub& health_stub() { return *health_; }

 private:
  void PrepareContext(grpc::ClientContext* context) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Placer::Stub> placer_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// gRPC and absl share code numbers; the message names the target so CLI errors say where.
absl::Status ToAbslStatus(const grpc::Status& status, const std::string& target);

}  // namespace placer::client
