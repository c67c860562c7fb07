#include "server/inference_service.h"

#include <grpcpp/support/method_handler.h>

#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/causal_lm.h"
#include "server/build_info.h"
#include "server/generate_request.h"
#include "server/generation_run.h"
#include "server/grpc_status.h"
#include "server/inference_tensors.h"
#include "server/model_admission.h"
#include "server/request_timer.h"

namespace placer::server {
namespace {

constexpr char kVersion[] = "1";

template <class Request, class Response>
grpc::internal::RpcServiceMethod* UnaryMethod(
    const char* path,
    grpc::Status (InferenceService::*handler)(grpc::ServerContext*, const Request*, Response*),
    InferenceService* service) {
  // RequestType as its own base type: gRPC reads it with SerializationTraits<Request>.
  return new grpc::internal::RpcServiceMethod(
      path, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<InferenceService, Request, Response>(
          std::mem_fn(handler), service));
}

// Generation's checks name placer.v1's fields; a client of this protocol knows them by the
// names it sent.
absl::Status InProtocolTerms(const absl::Status& status, bool prompt_is_text) {
  if (status.ok()) return status;
  static const std::pair<const char*, const char*> kRenames[] = {
      {"params.max_new_tokens", "max_tokens"},
      {"params.", ""},
      {"prompt_token_ids[", "input 'input_ids' element ["},
      {"prompt_token_ids", "input 'input_ids'"},
      {"token_ids[", "input 'input_ids' element ["},  // Forward's
      {"token_ids", "input 'input_ids'"},
      {"prompt", "input 'text_input'"},
  };
  std::string message(status.message());
  for (const auto& [from, to] : kRenames) {
    if (absl::StartsWith(message, from)) {
      if (!prompt_is_text && absl::string_view(from) == "prompt") break;
      message = absl::StrCat(to, message.substr(absl::string_view(from).size()));
      break;
    }
  }
  return absl::Status(status.code(), message);
}

inference::InferParameter BoolParameter(bool value) {
  inference::InferParameter parameter;
  parameter.set_bool_param(value);
  return parameter;
}

}  // namespace

InferenceService::InferenceService(const ModelSlot* model, RequestGate* gate,
                                   DaemonMetrics* metrics, InferenceServiceOptions options)
    : model_(model), gate_(gate), metrics_(metrics), options_(std::move(options)) {
  // In grpc_service.proto's order, as the generated service would add them.
  AddMethod(UnaryMethod("/inference.GRPCInferenceService/ServerLive", &InferenceService::ServerLive,
                        this));
  AddMethod(UnaryMethod("/inference.GRPCInferenceService/ServerReady",
                        &InferenceService::ServerReady, this));
  AddMethod(UnaryMethod("/inference.GRPCInferenceService/ModelReady", &InferenceService::ModelReady,
                        this));
  AddMethod(UnaryMethod("/inference.GRPCInferenceService/ServerMetadata",
                        &InferenceService::ServerMetadata, this));
  AddMethod(UnaryMethod("/inference.GRPCInferenceService/ModelMetadata",
                        &InferenceService::ModelMetadata, this));
  AddMethod(UnaryMethod("/inference.GRPCInferenceService/ModelInfer", &InferenceService::ModelInfer,
                        this));
  AddMethod(new grpc::internal::RpcServiceMethod(
      "/inference.GRPCInferenceService/ModelStreamInfer", grpc::internal::RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<InferenceService, inference::ModelInferRequest,
                                               inference::ModelStreamInferResponse>(
          std::mem_fn(&InferenceService::ModelStreamInfer), this)));
}

grpc::Status InferenceService::Finish(const char* rpc, grpc::Status status) {
  metrics_->CountRequest(rpc, CodeName(status.error_code()));
  RequestTimer::NoteStatus(CodeName(status.error_code()), status);
  return status;
}

std::string InferenceService::ModelName(const ModelSnapshot& model) const {
  if (!options_.model_name.empty()) return options_.model_name;
  if (model.path.empty()) return "";
  std::filesystem::path path(model.path);
  if (!path.has_filename()) path = path.parent_path();  // "models/demo/"
  return path.filename().string();
}

grpc::Status InferenceService::CheckModel(const ModelSnapshot& model, const std::string& name,
                                          const std::string& version) const {
  const std::string served = ModelName(model);
  if (served.empty()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("model '", name, "': placerd serves no model (no --model)"));
  }
  if (name != served) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("model '", name, "' is not served here; placerd serves '", served, "'"));
  }
  if (!version.empty() && version != kVersion) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("model '", name, "' has no version '", version,
                                     "'; its only version is '", kVersion, "'"));
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::ServerLive(grpc::ServerContext* context,
                                          const inference::ServerLiveRequest*,
                                          inference::ServerLiveResponse* response) {
  RequestTimer timer(metrics_, "ServerLive", context);
  response->set_live(true);
  return Finish("ServerLive", grpc::Status::OK);
}

grpc::Status InferenceService::ServerReady(grpc::ServerContext* context,
                                           const inference::ServerReadyRequest*,
                                           inference::ServerReadyResponse* response) {
  RequestTimer timer(metrics_, "ServerReady", context);
  // What health says: SERVING once the model is ready, until draining begins.
  response->set_ready(model_->Get()->state == ModelState::kReady && !gate_->draining());
  return Finish("ServerReady", grpc::Status::OK);
}

grpc::Status InferenceService::ModelReady(grpc::ServerContext* context,
                                          const inference::ModelReadyRequest* request,
                                          inference::ModelReadyResponse* response) {
  RequestTimer timer(metrics_, "ModelReady", context);
  const auto model = model_->Get();
  grpc::Status status = CheckModel(*model, request->name(), request->version());
  if (status.ok()) response->set_ready(model->state == ModelState::kReady && !gate_->draining());
  return Finish("ModelReady", status);
}

grpc::Status InferenceService::ServerMetadata(grpc::ServerContext* context,
                                              const inference::ServerMetadataRequest*,
                                              inference::ServerMetadataResponse* response) {
  RequestTimer timer(metrics_, "ServerMetadata", context);
  response->set_name("placer");
  response->set_version(PLACER_VERSION);
  // Request and response parameters are the one optional part of the protocol served here.
  response->add_extensions("parameters");
  return Finish("ServerMetadata", grpc::Status::OK);
}

grpc::Status InferenceService::ModelMetadata(grpc::ServerContext* context,
                                             const inference::ModelMetadataRequest* request,
                                             inference::ModelMetadataResponse* response) {
  RequestTimer timer(metrics_, "ModelMetadata", context);
  const auto model = model_->Get();
  grpc::Status status = CheckModel(*model, request->name(), request->version());
  if (!status.ok()) return Finish("ModelMetadata", status);
  response->set_name(ModelName(*model));
  response->add_versions(kVersion);
  response->set_platform(
      absl::StrCat("placer_", model->architecture.empty() ? "llm" : model->architecture));
  const auto add = [](const oip::TensorSignature& signature,
                      inference::ModelMetadataResponse::TensorMetadata* tensor) {
    tensor->set_name(signature.name);
    tensor->set_datatype(signature.datatype);
    for (const int64_t dim : signature.shape) tensor->add_shape(dim);
  };
  for (const auto& input : oip::ModelInputs()) add(input, response->add_inputs());
  for (const auto& output : oip::ModelOutputs()) add(output, response->add_outputs());
  return Finish("ModelMetadata", grpc::Status::OK);
}

absl::StatusOr<InferenceService::PreparedInfer> InferenceService::Prepare(
    const ModelSnapshot& model, const inference::ModelInferRequest& request) const {
  const grpc::Status found = CheckModel(model, request.model_name(), request.model_version());
  if (!found.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(found.error_code()), found.error_message());
  }
  PreparedInfer prepared;
  auto plan = oip::PlanInferRequest(request);
  if (!plan.ok()) return plan.status();
  prepared.plan = *std::move(plan);
  if (prepared.plan.kind == oip::InferPlan::Kind::kGenerate) {
    auto generation = BuildGenerationRequest(prepared.plan.generate, model, options_.text_limits);
    if (!generation.ok()) return InProtocolTerms(generation.status(), prepared.plan.prompt_is_text);
    prepared.generation = *std::move(generation);
  }
  return prepared;
}

absl::Status InferenceService::Run(grpc::ServerContext* context, const ModelSnapshot& model,
                                   const inference::ModelInferRequest& request,
                                   const PreparedInfer& prepared, SequenceMetrics* sequence,
                                   std::function<bool()> should_stop,
                                   const ResponseWriter& write) const {
  const oip::InferPlan& plan = prepared.plan;
  const auto response_for_request = [&] {
    inference::ModelInferResponse response;
    response.set_model_name(ModelName(model));
    response.set_model_version(kVersion);
    response.set_id(request.id());
    return response;
  };
  const auto with_prefix = [&plan](int64_t n) {
    std::vector<int64_t> shape = plan.batch_prefix;
    shape.push_back(n);
    return shape;
  };

  if (plan.kind == oip::InferPlan::Kind::kLogits) {
    const std::vector<int32_t> tokens(plan.forward.token_ids().begin(),
                                      plan.forward.token_ids().end());
    auto logits = model.model->Forward(tokens, plan.forward.all_positions());
    if (!logits.ok()) return InProtocolTerms(logits.status(), false);
    inference::ModelInferResponse response = response_for_request();
    std::vector<int64_t> shape = plan.batch_prefix;
    shape.insert(shape.end(), logits->shape.begin(), logits->shape.end());
    oip::AddFp32Output("logits", shape, logits->values.data(), logits->values.size(), &response);
    write(std::move(response), true);
    return absl::OkStatus();
  }

  std::string text = plan.include_prompt_text ? plan.generate.prompt() : "";
  std::vector<int32_t> ids;
  const auto add_outputs = [&](inference::ModelInferResponse* response) {
    if (plan.text_output) oip::AddBytesOutput("text_output", with_prefix(1), {text}, response);
    if (plan.output_ids) {
      oip::AddInt32Output("output_ids", with_prefix(static_cast<int64_t>(ids.size())), ids,
                          response);
    }
  };
  const GenerationCaller caller{context, gate_, sequence, std::move(should_stop)};
  auto summary = RunGeneration(model, prepared.generation, plan.generate.params(), caller,
                               [&](const model::SampledToken& token, const std::string& delta) {
                                 text += delta;
                                 ids.push_back(token.id);
                                 if (!plan.stream) return true;
                                 inference::ModelInferResponse response = response_for_request();
                                 add_outputs(&response);
                                 (*response.mutable_parameters())["triton_final_response"] =
                                     BoolParameter(false);
                                 text.clear();
                                 ids.clear();
                                 return write(std::move(response), false);
                               });
  if (!summary.ok()) return InProtocolTerms(summary.status(), plan.prompt_is_text);
  text += summary->final_text;
  inference::ModelInferResponse last = response_for_request();
  add_outputs(&last);
  auto& parameters = *last.mutable_parameters();
  if (plan.stream) parameters["triton_final_response"] = BoolParameter(true);
  parameters["finish_reason"].set_string_param(model::FinishReasonName(summary->finish));
  parameters["prompt_tokens"].set_int64_param(summary->prompt_tokens);
  parameters["completion_tokens"].set_int64_param(summary->completion_tokens);
  write(std::move(last), true);
  return absl::OkStatus();
}

grpc::Status InferenceService::ModelInfer(grpc::ServerContext* context,
                                          const inference::ModelInferRequest* request,
                                          inference::ModelInferResponse* response) {
  RequestTimer timer(metrics_, "ModelInfer", context);
  const RequestGate::Ticket ticket = gate_->TryEnter();
  std::shared_ptr<const ModelSnapshot> model;
  grpc::Status status = AdmitModelCall(ticket, *model_, &model);
  if (!status.ok()) return Finish("ModelInfer", status);
  auto prepared = Prepare(*model, *request);
  if (!prepared.ok()) return Finish("ModelInfer", ToGrpcStatus(prepared.status()));
  if (prepared->plan.stream) {
    return Finish("ModelInfer",
                  grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               "stream: true streams one response per token, which the unary "
                               "ModelInfer cannot; call ModelStreamInfer"));
  }
  const absl::Status ran = Run(context, *model, *request, *prepared, &timer.sequence(), nullptr,
                               [response](inference::ModelInferResponse answer, bool) {
                                 *response = std::move(answer);
                                 return true;
                               });
  return Finish("ModelInfer", ToGrpcStatus(ran));
}

}  // namespace placer::server
