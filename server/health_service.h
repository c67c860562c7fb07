// grpc.health.v1.Health, ours instead of gRPC's default service: the default one answers
// SERVING for "" from the moment the server starts until the daemon can say otherwise, so a
// probe could route traffic to a daemon still loading. Every service here starts NOT_SERVING.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"

namespace placer::server {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // `services` are known from the start (NOT_SERVING); others answer NOT_FOUND.
  explicit HealthService(std::initializer_list<std::string> services);

  void SetServing(bool serving);
  // NOT_SERVING for good: later SetServing calls are ignored (draining).
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  // Sends the current status, then every change, until the client goes away or the server
  // shuts down.
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  Status StatusOf(const std::string& service) const;  // mutex_ held

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, bool> serving_;
  bool shut_down_ = false;
};

}  // namespace placer::server
