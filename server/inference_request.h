// What a ModelInferRequest asks placer to do, decided from the request alone: generate (from
// `text_input` or `input_ids`, with the settings of inference_settings.h) or, when the
// `logits` output is asked for, one forward pass as placer.v1's Forward. The generation is
// expressed as placer.v1's GenerateRequest, so it is built, checked and run by the code that
// runs Generate. Errors name the input, output or parameter. Pure protobuf, absl and JSON: the
// infer_request fuzz target runs it on arbitrary requests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "placer/v1/placer.pb.h"

namespace placer::server::oip {

// The inputs and outputs placer's model takes and gives, for ModelMetadata.
struct TensorSignature {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;  // -1: variable
};
const std::vector<TensorSignature>& ModelInputs();
const std::vector<TensorSignature>& ModelOutputs();

struct InferPlan {
  enum class Kind { kGenerate, kLogits };
  Kind kind = Kind::kGenerate;
  v1::GenerateRequest generate;  // kGenerate: prompt or prompt_token_ids, and params
  v1::ForwardRequest forward;    // kLogits
  bool stream = false;           // one response per token (ModelStreamInfer only)
  bool prompt_is_text = false;
  bool include_prompt_text = false;  // text_output starts with the prompt
  bool text_output = false;          // outputs to answer a generation with
  bool output_ids = false;
  // Outputs take the leading batch dimension of the input they answer ([1,1] prompts give
  // [1,1] text, [1,n] ids give [1,m]); empty when the input had none.
  std::vector<int64_t> batch_prefix;
};

absl::StatusOr<InferPlan> PlanInferRequest(const inference::ModelInferRequest& request);

}  // namespace placer::server::oip
