#include "server/model_admission.h"

#include "absl/strings/str_cat.h"

namespace placer::server {

grpc::Status DrainingStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "placerd is draining (shutting down); retry on another replica");
}

grpc::Status AdmitModelCall(const RequestGate::Ticket& ticket, const ModelSlot& slot,
                            std::shared_ptr<const ModelSnapshot>* model) {
  if (!ticket.admitted()) return DrainingStatus();
  *model = slot.Get();
  const ModelSnapshot& snapshot = **model;
  switch (snapshot.state) {
    case ModelState::kNone:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "no model loaded: start placerd with --model DIR");
    case ModelState::kLoading:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("model ", snapshot.path, " is still loading"));
    case ModelState::kFailed:
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("model ", snapshot.path, " failed to load: ", snapshot.error));
    case ModelState::kReady:
      break;
  }
  return grpc::Status::OK;
}

}  // namespace placer::server
