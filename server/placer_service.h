// The placer.v1.Placer gRPC service: admission through the drain gate, per-RPC metrics, and
// answers that say exactly why a request cannot be served yet.
#pragma once

#include "placer/v1/placer.grpc.pb.h"
#include "server/metrics.h"
#include "server/model_slot.h"
#include "server/request_gate.h"
#include "server/text_generation.h"

namespace placer::server {

class PlacerService final : public placer::v1::Placer::Service {
 public:
  PlacerService(const ModelSlot* model, RequestGate* gate, DaemonMetrics* metrics,
                TextLimits text_limits = {})
      : model_(model), gate_(gate), metrics_(metrics), text_limits_(text_limits) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Forward(grpc::ServerContext* context, const v1::ForwardRequest* request,
                       v1::ForwardResponse* response) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;

 private:
  // Admits the RPC and checks a model is ready (handing out the snapshot it will use); a
  // non-OK status is the RPC's answer.
  grpc::Status AdmitModelCall(const RequestGate::Ticket& ticket,
                              std::shared_ptr<const ModelSnapshot>* model) const;
  grpc::Status Finish(const char* rpc, grpc::Status status);

  const ModelSlot* model_;
  RequestGate* gate_;
  DaemonMetrics* metrics_;
  TextLimits text_limits_;
};

}  // namespace placer::server
