#include "server/placer_service.h"

#include <grpcpp/support/method_handler.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "model/causal_lm.h"
#include "model/generation.h"
#include "server/generate_request.h"
#include "server/grpc_status.h"
#include "server/model_admission.h"
#include "server/generation_run.h"
#include "server/request_timer.h"
#include "server/build_info.h"

namespace placer::server {
namespace {

// The paths in placer.proto (service placer.v1.Placer); every e2e test calls them through
// the generated stubs, so a mismatch would fail them all.
constexpr char kGenerate[] = "/placer.v1.Placer/Generate";
constexpr char kForward[] = "/placer.v1.Placer/Forward";
constexpr char kTokenize[] = "/placer.v1.Placer/Tokenize";
constexpr char kGetModelInfo[] = "/placer.v1.Placer/GetModelInfo";

template <class Request, class Response>
grpc::internal::RpcServiceMethod* UnaryMethod(
    const char* path,
    grpc::Status (PlacerService::*handler)(grpc::ServerContext*, const Request*, Response*),
    PlacerService* service) {
  // RequestType as its own base type: gRPC reads it with SerializationTraits<Request>.
  return new grpc::internal::RpcServiceMethod(
      path, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<PlacerService, Request, Response>(
          std::mem_fn(handler), service));
}

}  // namespace

PlacerService::PlacerService(const ModelSlot* model, RequestGate* gate, DaemonMetrics* metrics,
                             TextLimits text_limits)
    : model_(model), gate_(gate), metrics_(metrics), text_limits_(text_limits) {
  // In placer.proto's order, as the generated service would add them.
  AddMethod(new grpc::internal::RpcServiceMethod(
      kGenerate, grpc::internal::RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<PlacerService, v1::GenerateRequest,
                                                 v1::GenerateResponse>(
          std::mem_fn(&PlacerService::Generate), this)));
  AddMethod(UnaryMethod(kForward, &PlacerService::Forward, this));
  AddMethod(UnaryMethod(kTokenize, &PlacerService::Tokenize, this));
  AddMethod(UnaryMethod(kGetModelInfo, &PlacerService::GetModelInfo, this));
}

grpc::Status PlacerService::Finish(const char* rpc, grpc::Status status) {
  metrics_->CountRequest(rpc, CodeName(status.error_code()));
  RequestTimer::NoteStatus(CodeName(status.error_code()), status);
  return status;
}

grpc::Status PlacerService::Generate(grpc::ServerContext* context,
                                     const v1::GenerateRequest* request,
                                     grpc::ServerWriter<v1::GenerateResponse>* writer) {
  RequestTimer timer(metrics_, "Generate", context);
  const RequestGate::Ticket ticket = gate_->TryEnter();
  std::shared_ptr<const ModelSnapshot> model;
  grpc::Status status = AdmitModelCall(ticket, *model_, &model);
  if (!status.ok()) return Finish("Generate", status);
  auto generation = BuildGenerationRequest(*request, *model, text_limits_);
  if (!generation.ok()) return Finish("Generate", ToGrpcStatus(generation.status()));

  const GenerationCaller caller{context, gate_, &timer.sequence(), nullptr};
  auto summary = RunGeneration(
      *model, *generation, request->params(), caller,
      [&](const model::SampledToken& token, const std::string& text) {
        v1::GenerateResponse chunk;
        chunk.add_token_ids(token.id);
        if (request->return_logprobs()) chunk.add_logprobs(token.logprob);
        chunk.set_text(text);
        return writer->Write(chunk);
      });
  if (!summary.ok()) return Finish("Generate", ToGrpcStatus(summary.status()));
  v1::GenerateResponse last;
  last.set_text(summary->final_text);
  last.set_finish_reason(model::FinishReasonName(summary->finish));
  last.mutable_usage()->set_prompt_tokens(summary->prompt_tokens);
  last.mutable_usage()->set_completion_tokens(summary->completion_tokens);
  writer->Write(last);
  return Finish("Generate", grpc::Status::OK);
}

grpc::Status PlacerService::Forward(grpc::ServerContext* context,
                                    const v1::ForwardRequest* request,
                                    v1::ForwardResponse* response) {
  RequestTimer timer(metrics_, "Forward", context);
  const RequestGate::Ticket ticket = gate_->TryEnter();
  std::shared_ptr<const ModelSnapshot> model;
  grpc::Status status = AdmitModelCall(ticket, *model_, &model);
  if (!status.ok()) return Finish("Forward", status);
  const std::vector<int32_t> tokens(request->token_ids().begin(), request->token_ids().end());
  auto logits = model->model->Forward(tokens, request->all_positions());
  if (!logits.ok()) return Finish("Forward", ToGrpcStatus(logits.status()));
  v1::Tensor* out = response->mutable_logits();
  for (int64_t dim : logits->shape) out->add_shape(dim);
  out->set_dtype("float32");
  // Little-endian hosts only (x86-64, aarch64): the floats are already in wire order.
  out->set_data(reinterpret_cast<const char*>(logits->values.data()),
                logits->values.size() * sizeof(float));
  return Finish("Forward", grpc::Status::OK);
}

grpc::Status PlacerService::Tokenize(grpc::ServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) {
  RequestTimer timer(metrics_, "Tokenize", context);
  const RequestGate::Ticket ticket = gate_->TryEnter();
  std::shared_ptr<const ModelSnapshot> model;
  grpc::Status status = AdmitModelCall(ticket, *model_, &model);
  if (status.ok()) status = ToGrpcStatus(TokenizeText(*model, *request, response));
  return Finish("Tokenize", status);
}

grpc::Status PlacerService::GetModelInfo(grpc::ServerContext* context,
                                         const v1::GetModelInfoRequest*,
                                         v1::ModelInfo* response) {
  RequestTimer timer(metrics_, "GetModelInfo", context);
  RequestGate::Ticket ticket = gate_->TryEnter();
  if (!ticket.admitted()) return Finish("GetModelInfo", DrainingStatus());
  const auto model = model_->Get();
  response->set_state(ModelStateName(model->state));
  response->set_model_path(model->path);
  response->set_architecture(model->architecture);
  response->set_dtype(model->dtype);
  response->set_compute_dtype(model->compute_dtype);
  response->set_parameter_count(model->parameter_count);
  response->set_error(model->error);
  response->set_server_version(PLACER_VERSION);
  for (const auto& [module, device] : model->device_map) {
    (*response->mutable_device_map())[module] = device;
  }
  if (model->state == ModelState::kReady) {
    const ModelSnapshot::OffloadExecution& execution = model->offload_execution;
    v1::OffloadExecution* out = response->mutable_offload_execution();
    out->set_mode(execution.mode);
    out->set_device(execution.device);
    out->set_staging_slots(execution.staging_slots);
    out->set_reason(execution.reason);
    for (const std::string& block : execution.blocks) out->add_blocks(block);
    if (!model->quantization.source.empty()) {
      v1::Quantization* quantization = response->mutable_quantization();
      quantization->set_source(model->quantization.source);
      quantization->set_summary(model->quantization.summary);
      quantization->set_activations(model->quantization.activations);
    }
  }
  for (const ModelSnapshot::DeviceFigures& figures : model->devices) {
    v1::DeviceInfo* device = response->add_devices();
    device->set_name(figures.name);
    device->set_total_bytes(figures.total_bytes);
    device->set_free_bytes(figures.free_bytes);
    device->set_weights_bytes(figures.weights_bytes);
    device->set_kv_cache_bytes(figures.kv_cache_bytes);
    device->set_reserved_bytes(figures.reserved_bytes);
  }
  return Finish("GetModelInfo", grpc::Status::OK);
}

}  // namespace placer::server
