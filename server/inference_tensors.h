// Tensors of the Open Inference Protocol (proto/inference/grpc_service.proto) in and out:
// where an input's data is (its typed `contents`, or its entry of `raw_input_contents`), its
// elements read as the few C++ types generation needs, and outputs written the way
// tritonclient reads them (`raw_output_contents`). Every refusal names the tensor and says why.
// Pure protobuf and absl: the infer_request fuzz target links it alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"

namespace placer::server::oip {

using InputTensor = inference::ModelInferRequest::InferInputTensor;

// An input with its data: `raw` is its raw_input_contents entry, or null when the data is in
// the tensor's typed contents.
struct LocatedInput {
  const InputTensor* tensor = nullptr;
  const std::string* raw = nullptr;
};

// Every input of `request`, paired with its raw entry when the request uses
// raw_input_contents (then one per input, in order, and no typed contents beside). Refuses a
// repeated input name, an unknown datatype, a negative or overflowing shape, and raw data whose
// size does not match the shape.
absl::StatusOr<std::vector<LocatedInput>> LocateInputs(const inference::ModelInferRequest& request);

// Elements of a shape; INVALID_ARGUMENT naming `tensor` for a negative dimension or a count
// beyond 2^31.
absl::StatusOr<int64_t> ElementCount(const google::protobuf::RepeatedField<int64_t>& shape,
                                     absl::string_view tensor);

// A BYTES tensor's raw data: `count` elements, each a 4-byte little-endian length and then
// that many bytes, nothing left over. Errors name `tensor` and the element.
absl::StatusOr<std::vector<std::string>> DecodeBytesElements(absl::string_view raw, int64_t count,
                                                             absl::string_view tensor);

// The elements of an input, as the type asked for. BYTES for ReadBytes; BOOL for ReadBools;
// any integer datatype for ReadIntegers; FP32 or FP64 (and integers, exactly) for ReadDoubles.
// Another datatype is INVALID_ARGUMENT naming the input, its datatype and what it may be.
absl::StatusOr<std::vector<std::string>> ReadBytes(const LocatedInput& input);
absl::StatusOr<std::vector<bool>> ReadBools(const LocatedInput& input);
absl::StatusOr<std::vector<int64_t>> ReadIntegers(const LocatedInput& input);
absl::StatusOr<std::vector<double>> ReadDoubles(const LocatedInput& input);

// Output tensors, appended to `response` with their data in raw_output_contents (one entry per
// output, so outputs must all go there).
void AddBytesOutput(const std::string& name, std::vector<int64_t> shape,
                    const std::vector<std::string>& elements,
                    inference::ModelInferResponse* response);
void AddInt32Output(const std::string& name, std::vector<int64_t> shape,
                    const std::vector<int32_t>& elements, inference::ModelInferResponse* response);
void AddFp32Output(const std::string& name, std::vector<int64_t> shape, const float* elements,
                   std::size_t count, inference::ModelInferResponse* response);

}  // namespace placer::server::oip
