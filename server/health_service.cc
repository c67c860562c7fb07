#include "server/health_service.h"

#include <chrono>

namespace placer::server {

using grpc::health::v1::HealthCheckResponse;

HealthService::HealthService(std::initializer_list<std::string> services) {
  for (const std::string& service : services) serving_[service] = false;
}

void HealthService::SetServing(bool serving) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    for (auto& [service, state] : serving_) state = serving;
  }
  changed_.notify_all();
}

void HealthService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    for (auto& [service, state] : serving_) state = false;
  }
  changed_.notify_all();
}

HealthService::Status HealthService::StatusOf(const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Status status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service " + request->service());
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool sent_any = false;
  Status last = HealthCheckResponse::UNKNOWN;
  while (!context->IsCancelled()) {
    const Status status = StatusOf(request->service());
    if (!sent_any || status != last) {
      HealthCheckResponse response;
      response.set_status(status);
      lock.unlock();
      if (!writer->Write(response)) return grpc::Status::CANCELLED;
      lock.lock();
      sent_any = true;
      last = status;
    }
    // Woken by changes; the timeout notices a client that went away or a server shutdown.
    changed_.wait_for(lock, std::chrono::milliseconds(200));
  }
  return grpc::Status::CANCELLED;
}

}  // namespace placer::server
