#include "server/placer_service.h"

#include "absl/strings/str_cat.h"
#include "server/build_info.h"

namespace placer::server {
namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

const grpc::Status kDraining(grpc::StatusCode::UNAVAILABLE,
                             "placerd is draining (shutting down); retry on another replica");

}  // namespace

grpc::Status PlacerService::Finish(const char* rpc, grpc::Status status) {
  metrics_->CountRequest(rpc, CodeName(status.error_code()));
  return status;
}

grpc::Status PlacerService::AdmitModelCall(RequestGate::Ticket& ticket) const {
  if (!ticket.admitted()) return kDraining;
  const auto model = model_->Get();
  switch (model->state) {
    case ModelState::kNone:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "no model loaded: start placerd with --model DIR");
    case ModelState::kLoading:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("model ", model->path, " is still loading"));
    case ModelState::kFailed:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("model ", model->path, " failed to load: ", model->error));
    case ModelState::kIndexed:
      return grpc::Status(
          grpc::StatusCode::UNIMPLEMENTED,
          absl::StrCat("model ", model->path,
                       " is indexed, but this placerd build has no model runtime yet; "
                       "only GetModelInfo is served"));
    case ModelState::kReady:
      break;
  }
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "this placerd build has no model runtime yet");
}

grpc::Status PlacerService::Generate(grpc::ServerContext*, const v1::GenerateRequest*,
                                     grpc::ServerWriter<v1::GenerateResponse>*) {
  RequestGate::Ticket ticket = gate_->TryEnter();
  return Finish("Generate", AdmitModelCall(ticket));
}

grpc::Status PlacerService::Forward(grpc::ServerContext*, const v1::ForwardRequest*,
                                    v1::ForwardResponse*) {
  RequestGate::Ticket ticket = gate_->TryEnter();
  return Finish("Forward", AdmitModelCall(ticket));
}

grpc::Status PlacerService::Tokenize(grpc::ServerContext*, const v1::TokenizeRequest*,
                                     v1::TokenizeResponse*) {
  RequestGate::Ticket ticket = gate_->TryEnter();
  return Finish("Tokenize", AdmitModelCall(ticket));
}

grpc::Status PlacerService::GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) {
  RequestGate::Ticket ticket = gate_->TryEnter();
  if (!ticket.admitted()) return Finish("GetModelInfo", kDraining);
  const auto model = model_->Get();
  response->set_state(ModelStateName(model->state));
  response->set_model_path(model->path);
  response->set_architecture(model->architecture);
  response->set_dtype(model->dtype);
  response->set_parameter_count(model->parameter_count);
  response->set_error(model->error);
  response->set_server_version(PLACER_VERSION);
  return Finish("GetModelInfo", grpc::Status::OK);
}

}  // namespace placer::server
