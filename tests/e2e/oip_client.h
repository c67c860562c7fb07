// A Triton-style client for the Open Inference Protocol end-to-end tests, on stubs generated
// from Triton's own grpc_service.proto (upstream_triton/, not placer's proto/inference), so
// the tests see placerd as a Triton client does: requests built the way tritonclient builds
// them (raw_input_contents with 4-byte length-prefixed BYTES), or with typed contents.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpc_service.grpc.pb.h"

namespace placer::testing {

// Builds a ModelInferRequest input by input.
class InferRequestBuilder {
 public:
  // raw: data in raw_input_contents (tritonclient's way); otherwise in typed contents.
  explicit InferRequestBuilder(std::string model, bool raw = true);

  InferRequestBuilder& Id(const std::string& id);
  InferRequestBuilder& Bytes(const std::string& name, const std::vector<std::string>& values,
                             std::vector<int64_t> shape = {1, 1});
  InferRequestBuilder& Int32(const std::string& name, const std::vector<int32_t>& values,
                             std::vector<int64_t> shape = {1, 1});
  InferRequestBuilder& Int64(const std::string& name, const std::vector<int64_t>& values,
                             std::vector<int64_t> shape = {1, 1});
  InferRequestBuilder& Fp32(const std::string& name, float value,
                            std::vector<int64_t> shape = {1, 1});
  InferRequestBuilder& Bool(const std::string& name, bool value,
                            std::vector<int64_t> shape = {1, 1});
  InferRequestBuilder& Output(const std::string& name);
  // Request parameters.
  InferRequestBuilder& Parameter(const std::string& name, int64_t value);
  InferRequestBuilder& Parameter(const std::string& name, bool value);
  InferRequestBuilder& Parameter(const std::string& name, double value);

  const inference::ModelInferRequest& request() const { return request_; }

 private:
  inference::ModelInferRequest::InferInputTensor* Add(const std::string& name,
                                                      const std::string& datatype,
                                                      const std::vector<int64_t>& shape);
  inference::ModelInferRequest request_;
  bool raw_;
};

// 4-byte little-endian length, then the bytes, for every element.
std::string FrameBytes(const std::vector<std::string>& values);

// An output of a response, read from raw_output_contents.
const inference::ModelInferResponse::InferOutputTensor* FindOutput(
    const inference::ModelInferResponse& response, const std::string& name);
std::optional<std::vector<std::string>> BytesOutput(const inference::ModelInferResponse& response,
                                                    const std::string& name);
std::optional<std::vector<int32_t>> Int32Output(const inference::ModelInferResponse& response,
                                                const std::string& name);
std::optional<std::string> RawOutput(const inference::ModelInferResponse& response,
                                     const std::string& name);

// Stubs on one channel; every call carries `authorization: Bearer <token>` when a token is set.
class OipClient {
 public:
  // credentials: plaintext when null.
  OipClient(const std::string& target, std::string token,
            std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  // A context with a 60 s deadline and the token.
  std::unique_ptr<grpc::ClientContext> Context() const;
  inference::GRPCInferenceService::Stub& stub() { return *stub_; }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response);

  // ModelStreamInfer: writes every request, then half-closes, and reads every response.
  struct StreamOutcome {
    std::vector<inference::ModelStreamInferResponse> responses;
    grpc::Status status;
  };
  StreamOutcome Stream(const std::vector<inference::ModelInferRequest>& requests);

 private:
  std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

// The text a stream of responses for `id` adds up to, with whether exactly its last response
// said triton_final_response and every earlier one did not.
struct StreamedText {
  std::string text;
  std::vector<int32_t> ids;
  int responses = 0;
  bool final_flag_only_on_last = true;
  std::string error;
};
StreamedText CollectStream(const std::vector<inference::ModelStreamInferResponse>& responses,
                           const std::string& id);

}  // namespace placer::testing
