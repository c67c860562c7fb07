#include "tests/e2e/oip_client.h"

#include <cstring>

namespace placer::testing {

InferRequestBuilder::InferRequestBuilder(std::string model, bool raw) : raw_(raw) {
  request_.set_model_name(std::move(model));
}

InferRequestBuilder& InferRequestBuilder::Id(const std::string& id) {
  request_.set_id(id);
  return *this;
}

inference::ModelInferRequest::InferInputTensor* InferRequestBuilder::Add(
    const std::string& name, const std::string& datatype, const std::vector<int64_t>& shape) {
  auto* input = request_.add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (const int64_t dim : shape) input->add_shape(dim);
  return input;
}

std::string FrameBytes(const std::vector<std::string>& values) {
  std::string framed;
  for (const std::string& value : values) {
    const auto n = static_cast<uint32_t>(value.size());
    const char length[4] = {static_cast<char>(n), static_cast<char>(n >> 8),
                            static_cast<char>(n >> 16), static_cast<char>(n >> 24)};
    framed.append(length, 4);
    framed.append(value);
  }
  return framed;
}

template <class T>
std::string RawOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

InferRequestBuilder& InferRequestBuilder::Bytes(const std::string& name,
                                                const std::vector<std::string>& values,
                                                std::vector<int64_t> shape) {
  auto* input = Add(name, "BYTES", shape);
  if (raw_) {
    *request_.add_raw_input_contents() = FrameBytes(values);
  } else {
    for (const std::string& value : values) input->mutable_contents()->add_bytes_contents(value);
  }
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Int32(const std::string& name,
                                                const std::vector<int32_t>& values,
                                                std::vector<int64_t> shape) {
  auto* input = Add(name, "INT32", shape);
  if (raw_) {
    *request_.add_raw_input_contents() = RawOf(values);
  } else {
    for (const int32_t value : values) input->mutable_contents()->add_int_contents(value);
  }
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Int64(const std::string& name,
                                                const std::vector<int64_t>& values,
                                                std::vector<int64_t> shape) {
  auto* input = Add(name, "INT64", shape);
  if (raw_) {
    *request_.add_raw_input_contents() = RawOf(values);
  } else {
    for (const int64_t value : values) input->mutable_contents()->add_int64_contents(value);
  }
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Fp32(const std::string& name, float value,
                                               std::vector<int64_t> shape) {
  auto* input = Add(name, "FP32", shape);
  if (raw_) {
    *request_.add_raw_input_contents() = RawOf(std::vector<float>{value});
  } else {
    input->mutable_contents()->add_fp32_contents(value);
  }
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Bool(const std::string& name, bool value,
                                               std::vector<int64_t> shape) {
  auto* input = Add(name, "BOOL", shape);
  if (raw_) {
    *request_.add_raw_input_contents() = std::string(1, value ? '\1' : '\0');
  } else {
    input->mutable_contents()->add_bool_contents(value);
  }
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Output(const std::string& name) {
  request_.add_outputs()->set_name(name);
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Parameter(const std::string& name, int64_t value) {
  (*request_.mutable_parameters())[name].set_int64_param(value);
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Parameter(const std::string& name, bool value) {
  (*request_.mutable_parameters())[name].set_bool_param(value);
  return *this;
}

InferRequestBuilder& InferRequestBuilder::Parameter(const std::string& name, double value) {
  (*request_.mutable_parameters())[name].set_double_param(value);
  return *this;
}

const inference::ModelInferResponse::InferOutputTensor* FindOutput(
    const inference::ModelInferResponse& response, const std::string& name) {
  for (const auto& output : response.outputs()) {
    if (output.name() == name) return &output;
  }
  return nullptr;
}

std::optional<std::string> RawOutput(const inference::ModelInferResponse& response,
                                     const std::string& name) {
  for (int i = 0; i < response.outputs_size(); ++i) {
    if (response.outputs(i).name() != name) continue;
    if (i >= response.raw_output_contents_size()) return std::nullopt;
    return response.raw_output_contents(i);
  }
  return std::nullopt;
}

std::optional<std::vector<std::string>> BytesOutput(const inference::ModelInferResponse& response,
                                                    const std::string& name) {
  const std::optional<std::string> raw = RawOutput(response, name);
  if (!raw) return std::nullopt;
  std::vector<std::string> values;
  std::size_t at = 0;
  while (at + 4 <= raw->size()) {
    const auto* b = reinterpret_cast<const unsigned char*>(raw->data() + at);
    const uint32_t n = b[0] | b[1] << 8 | b[2] << 16 | uint32_t{b[3]} << 24;
    at += 4;
    if (at + n > raw->size()) return std::nullopt;
    values.push_back(raw->substr(at, n));
    at += n;
  }
  if (at != raw->size()) return std::nullopt;
  return values;
}

std::optional<std::vector<int32_t>> Int32Output(const inference::ModelInferResponse& response,
                                                const std::string& name) {
  const std::optional<std::string> raw = RawOutput(response, name);
  if (!raw || raw->size() % 4 != 0) return std::nullopt;
  std::vector<int32_t> values(raw->size() / 4);
  std::memcpy(values.data(), raw->data(), raw->size());
  return values;
}

OipClient::OipClient(const std::string& target, std::string token,
                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : token_(std::move(token)),
      channel_(grpc::CreateChannel(
          target, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials())),
      stub_(inference::GRPCInferenceService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> OipClient::Context() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
  return context;
}

grpc::Status OipClient::Infer(const inference::ModelInferRequest& request,
                              inference::ModelInferResponse* response) {
  auto context = Context();
  return stub_->ModelInfer(context.get(), request, response);
}

OipClient::StreamOutcome OipClient::Stream(
    const std::vector<inference::ModelInferRequest>& requests) {
  auto context = Context();
  auto stream = stub_->ModelStreamInfer(context.get());
  for (const auto& request : requests) stream->Write(request);
  stream->WritesDone();
  StreamOutcome outcome;
  for (inference::ModelStreamInferResponse response; stream->Read(&response);) {
    outcome.responses.push_back(response);
  }
  outcome.status = stream->Finish();
  return outcome;
}

StreamedText CollectStream(const std::vector<inference::ModelStreamInferResponse>& responses,
                           const std::string& id) {
  StreamedText collected;
  std::vector<bool> final_flags;
  for (const auto& message : responses) {
    const inference::ModelInferResponse& response = message.infer_response();
    if (response.id() != id) continue;
    if (!message.error_message().empty()) {
      collected.error = message.error_message();
      continue;
    }
    ++collected.responses;
    if (auto text = BytesOutput(response, "text_output"); text && !text->empty()) {
      collected.text += text->front();
    }
    if (auto ids = Int32Output(response, "output_ids")) {
      collected.ids.insert(collected.ids.end(), ids->begin(), ids->end());
    }
    const auto found = response.parameters().find("triton_final_response");
    final_flags.push_back(found != response.parameters().end() && found->second.bool_param());
  }
  for (std::size_t i = 0; i < final_flags.size(); ++i) {
    if (final_flags[i] != (i + 1 == final_flags.size())) collected.final_flag_only_on_last = false;
  }
  if (final_flags.empty()) collected.final_flag_only_on_last = false;
  return collected;
}

}  // namespace placer::testing
