#include "client/placer_client.h"

#include "absl/strings/str_cat.h"

namespace placer::client {
namespace {

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const ClientCredentials& c) {
  if (!c.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = c.ca_pem;
  ssl.pem_private_key = c.client_key_pem;
  ssl.pem_cert_chain = c.client_cert_pem;
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::Status ToAbslStatus(const grpc::Status& status, const std::string& target) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    message = absl::StrCat("placerd at ", target, " is unreachable: ", message);
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

PlacerClient::PlacerClient(const ClientOptions& options)
    : options_(options),
      channel_(grpc::CreateChannel(options.target, ChannelCredentialsFor(options.credentials))),
      placer_(v1::Placer::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

void PlacerClient::PrepareContext(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + options_.timeout);
  // Health does not need it, but sending it everywhere keeps one code path.
  if (!options_.credentials.bearer_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.credentials.bearer_token);
  }
}

absl::StatusOr<Health> PlacerClient::CheckHealth(const std::string& service) {
  grpc::ClientContext context;
  PrepareContext(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_->Check(&context, request, &response);
  if (!status.ok()) return ToAbslStatus(status, options_.target);
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return Health::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return Health::kNotServing;
    default:
      return Health::kUnknown;
  }
}

absl::StatusOr<v1::ModelInfo> PlacerClient::GetModelInfo() {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::ModelInfo info;
  const grpc::Status status = placer_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return ToAbslStatus(status, options_.target);
  return info;
}

absl::StatusOr<v1::ForwardResponse> PlacerClient::Forward(const v1::ForwardRequest& request) {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::ForwardResponse response;
  const grpc::Status status = placer_->Forward(&context, request, &response);
  if (!status.ok()) return ToAbslStatus(status, options_.target);
  return response;
}

absl::StatusOr<v1::TokenizeResponse> PlacerClient::Tokenize(const v1::TokenizeRequest& request) {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::TokenizeResponse response;
  const grpc::Status status = placer_->Tokenize(&context, request, &response);
  if (!status.ok()) return ToAbslStatus(status, options_.target);
  return response;
}

absl::Status PlacerClient::Generate(
    const v1::GenerateRequest& request,
    const std::function<void(const v1::GenerateResponse&)>& on_response) {
  grpc::ClientContext context;
  PrepareContext(&context);
  auto reader = placer_->Generate(&context, request);
  for (v1::GenerateResponse response; reader->Read(&response);) on_response(response);
  return ToAbslStatus(reader->Finish(), options_.target);
}

}  // namespace placer::client
