// The placer.v1.Placer gRPC service: admission through the drain gate, per-RPC metrics, and
// answers that say exactly why a request cannot be served yet.
//
// Built on grpc::Service with method handlers of its own, not on the generated
// Placer::Service: the generated unary handlers read requests as a plain MessageLite, which
// would bypass proto/wire's SerializationTraits (a text field with invalid UTF-8 answered with
// INVALID_ARGUMENT naming the field); these read every request as its own type.
#pragma once

#include <grpcpp/impl/service_type.h>

#include "placer/v1/placer.grpc.pb.h"
#include "server/metrics.h"
#include "server/model_slot.h"
#include "server/request_gate.h"
#include "server/text_generation.h"

namespace placer::server {

class PlacerService final : public grpc::Service {
 public:
  PlacerService(const ModelSlot* model, RequestGate* gate, DaemonMetrics* metrics,
                TextLimits text_limits = {});

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer);
  grpc::Status Forward(grpc::ServerContext* context, const v1::ForwardRequest* request,
                       v1::ForwardResponse* response);
  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response);
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response);

 private:
  grpc::Status Finish(const char* rpc, grpc::Status status);

  const ModelSlot* model_;
  RequestGate* gate_;
  DaemonMetrics* metrics_;
  TextLimits text_limits_;
};

}  // namespace placer::server
