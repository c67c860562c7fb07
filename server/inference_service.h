// The Open Inference Protocol's inference.GRPCInferenceService (KServe v2, with Triton's
// ModelStreamInfer), beside placer.v1.Placer on the same server: the same admission through
// the drain gate, request ids, logs, metrics and token check. Generation goes through the
// code Generate runs (BuildGenerationRequest, RunGeneration), logits through the model's
// Forward. What a request asks for is decided by inference_request.h.
//
// Registered with handlers of its own, as PlacerService is, so requests are read by
// proto/wire (a name with invalid UTF-8 is INVALID_ARGUMENT naming the field). RPCs of
// Triton's it does not list are UNIMPLEMENTED (gRPC's answer to an unknown method).
#pragma once

#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/sync_stream.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "inference/grpc_service.grpc.pb.h"
#include "model/generation.h"
#include "server/inference_request.h"
#include "server/metrics.h"
#include "server/model_slot.h"
#include "server/request_gate.h"
#include "server/sequence_metrics.h"
#include "server/text_generation.h"

namespace placer::server {

struct InferenceServiceOptions {
  // The served model's name; empty: the last component of the model's directory.
  std::string model_name;
  TextLimits text_limits;
  // Requests one ModelStreamInfer stream may have running or queued at once, beyond the
  // model's --max-batch-size (--max-queue).
  int max_queue = 64;
};

class InferenceService final : public grpc::Service {
 public:
  InferenceService(const ModelSlot* model, RequestGate* gate, DaemonMetrics* metrics,
                   InferenceServiceOptions options);

  grpc::Status ServerLive(grpc::ServerContext* context, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response);
  grpc::Status ServerReady(grpc::ServerContext* context, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response);
  grpc::Status ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest*,
                          inference::ModelReadyResponse* response);
  grpc::Status ServerMetadata(grpc::ServerContext* context, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response);
  grpc::Status ModelMetadata(grpc::ServerContext* context,
                             const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response);
  grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response);
  grpc::Status ModelStreamInfer(grpc::ServerContext* context,
                                grpc::ServerReaderWriter<inference::ModelStreamInferResponse,
                                                         inference::ModelInferRequest>* stream);

 private:
  // A request checked and ready to run against one model snapshot.
  struct PreparedInfer {
    oip::InferPlan plan;
    model::GenerationRequest generation;  // when plan.kind is kGenerate
  };
  // One response of a request; `final` is the last one.
  using ResponseWriter = std::function<bool(inference::ModelInferResponse response, bool final)>;

  // The model's name as the protocol calls it ("" while no model is configured).
  std::string ModelName(const ModelSnapshot& model) const;
  // NOT_FOUND for another model or a version other than "1" (or empty).
  grpc::Status CheckModel(const ModelSnapshot& model, const std::string& name,
                          const std::string& version) const;
  absl::StatusOr<PreparedInfer> Prepare(const ModelSnapshot& model,
                                        const inference::ModelInferRequest& request) const;
  // Runs a prepared request: one response, or with plan.stream one a token and a last one.
  absl::Status Run(grpc::ServerContext* context, const ModelSnapshot& model,
                   const inference::ModelInferRequest& request, const PreparedInfer& prepared,
                   SequenceMetrics* sequence, std::function<bool()> should_stop,
                   const ResponseWriter& write) const;
  grpc::Status Finish(const char* rpc, grpc::Status status);

  const ModelSlot* model_;
  RequestGate* gate_;
  DaemonMetrics* metrics_;
  const InferenceServiceOptions options_;
};

}  // namespace placer::server
