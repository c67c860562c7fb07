// Admission of a call that needs the model, shared by every service: refused while draining,
// FAILED_PRECONDITION saying why while no model is ready, otherwise the snapshot it will use
// for its whole length.
#pragma once

#include <grpcpp/support/status.h>

#include <memory>

#include "server/model_slot.h"
#include "server/request_gate.h"

namespace placer::server {

// UNAVAILABLE: what a call gets once draining has begun.
grpc::Status DrainingStatus();

// OK with `*model` set, or the call's answer.
grpc::Status AdmitModelCall(const RequestGate::Ticket& ticket, const ModelSlot& slot,
                            std::shared_ptr<const ModelSnapshot>* model);

}  // namespace placer::server
