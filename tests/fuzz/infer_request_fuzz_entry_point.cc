#include "tests/fuzz/infer_request_fuzz_entry_point.h"

#include <google/protobuf/stubs/common.h>

#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "server/inference_request.h"
#include "server/inference_settings.h"
#include "server/inference_tensors.h"

namespace placer::fuzz {

int FuzzInferRequest(const std::uint8_t* data, std::size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The bytes as one raw BYTES tensor of a few elements (the count from the first byte).
  const int64_t count = size > 0 ? data[0] % 8 : 0;
  (void)server::oip::DecodeBytesElements(bytes.substr(size > 0 ? 1 : 0), count, "input 'fuzz'");
  // The bytes as sampling_parameters JSON.
  server::oip::GenerationSettings settings;
  (void)server::oip::ApplySamplingParametersJson(bytes, &settings);
  // The bytes as a whole request.
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return 0;
  auto plan = server::oip::PlanInferRequest(request);
  if (plan.ok()) {
    const bool text = !plan->generate.prompt().empty();
    const bool ids = plan->generate.prompt_token_ids_size() > 0;
    if (text == ids) __builtin_trap();
  } else if (plan.status().message().empty()) {
    __builtin_trap();  // every refusal says why
  }
  return 0;
}

}  // namespace placer::fuzz
