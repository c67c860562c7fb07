// What an Open Inference Protocol request asks for (server/inference_request.h), from its
// bytes alone: BYTES framing, typed contents against raw, shapes, where settings come from and
// which wins, and refusals that name the tensor or parameter. Also replays the infer_request
// fuzz target's saved inputs.
#include "server/inference_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/inference_settings.h"
#include "server/inference_tensors.h"
#include "tests/fuzz/infer_request_fuzz_entry_point.h"

namespace placer::server::oip {
namespace {

std::string Framed(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    const auto n = static_cast<uint32_t>(v.size());
    out += std::string{static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 24)};
    out += v;
  }
  return out;
}

InputTensor* AddInput(inference::ModelInferRequest* request, const std::string& name,
                      const std::string& datatype, std::vector<int64_t> shape) {
  InputTensor* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (const int64_t dim : shape) input->add_shape(dim);
  return input;
}

void AddRaw(inference::ModelInferRequest* request, const std::string& name,
            const std::string& datatype, std::vector<int64_t> shape, std::string raw) {
  AddInput(request, name, datatype, std::move(shape));
  request->add_raw_input_contents(std::move(raw));
}

template <class T>
std::string RawOf(T value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(T));
}

void ExpectRefused(const inference::ModelInferRequest& request,
                   const std::vector<std::string>& says) {
  const auto plan = PlanInferRequest(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& part : says) {
    EXPECT_NE(plan.status().message().find(part), std::string::npos)
        << "'" << plan.status().message() << "' does not say '" << part << "'";
  }
}

TEST(BytesTensor, DecodesLengthPrefixedElementsAndNamesWhatIsWrong) {
  auto decoded = DecodeBytesElements(Framed({"ab", "", "xyz"}), 3, "input 'stop'");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, (std::vector<std::string>{"ab", "", "xyz"}));

  const auto truncated_length = DecodeBytesElements(std::string("\2\0", 2), 1, "input 'stop'");
  EXPECT_NE(truncated_length.status().message().find("input 'stop': BYTES element 0"),
            std::string::npos)
      << truncated_length.status();
  const auto truncated_data = DecodeBytesElements(Framed({"abc"}).substr(0, 5), 1, "input 's'");
  EXPECT_NE(truncated_data.status().message().find("says 3 bytes but only 1"), std::string::npos)
      << truncated_data.status();
  const auto trailing = DecodeBytesElements(Framed({"a", "b"}), 1, "input 's'");
  EXPECT_NE(trailing.status().message().find("5 byte(s) after"), std::string::npos)
      << trailing.status();
  // A length near 2^32 must not wrap around.
  EXPECT_FALSE(DecodeBytesElements(std::string("\xff\xff\xff\xff", 4), 1, "s").ok());
}

TEST(InferPlan, RawAndTypedContentsAndBothShapesGiveTheSamePrompt) {
  inference::ModelInferRequest raw;
  AddRaw(&raw, "text_input", "BYTES", {1, 1}, Framed({"hello"}));
  AddRaw(&raw, "max_tokens", "INT32", {1, 1}, RawOf<int32_t>(7));
  inference::ModelInferRequest typed;
  AddInput(&typed, "text_input", "BYTES", {1})->mutable_contents()->add_bytes_contents("hello");
  AddInput(&typed, "max_tokens", "INT64", {1})->mutable_contents()->add_int64_contents(7);
  for (const auto& request : {raw, typed}) {
    const auto plan = PlanInferRequest(request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->kind, InferPlan::Kind::kGenerate);
    EXPECT_EQ(plan->generate.prompt(), "hello");
    EXPECT_EQ(plan->generate.params().max_new_tokens(), 7u);
    EXPECT_TRUE(plan->text_output);
    EXPECT_FALSE(plan->output_ids);
    EXPECT_TRUE(plan->include_prompt_text);  // not streamed: the vLLM backend repeats it
  }
  EXPECT_EQ(PlanInferRequest(raw)->batch_prefix, std::vector<int64_t>{1});
  EXPECT_EQ(PlanInferRequest(typed)->batch_prefix, std::vector<int64_t>{});
}

TEST(InferPlan, SettingsComeFromParametersThenJsonThenTheirOwnTensors) {
  inference::ModelInferRequest request;
  AddRaw(&request, "text_input", "BYTES", {1}, Framed({"hi"}));
  AddRaw(&request, "sampling_parameters", "BYTES", {1},
         Framed({R"({"temperature": "0.5", "top_k": -1, "seed": 9, "stop": ["a", "bc"],)"
                 R"( "max_tokens": 3, "presence_penalty": null})"}));
  AddRaw(&request, "max_tokens", "INT32", {1}, RawOf<int32_t>(11));
  AddRaw(&request, "stream", "BOOL", {1}, std::string(1, '\1'));
  (*request.mutable_parameters())["temperature"].set_double_param(0.1);
  (*request.mutable_parameters())["top_p"].set_string_param("0.25");
  (*request.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  const auto plan = PlanInferRequest(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::SamplingParams& params = plan->generate.params();
  EXPECT_FLOAT_EQ(params.temperature(), 0.5f);  // the JSON over the parameter
  EXPECT_FLOAT_EQ(params.top_p(), 0.25f);
  EXPECT_EQ(params.top_k(), 0u);  // vLLM's -1: no cut
  EXPECT_EQ(params.seed(), 9u);
  EXPECT_EQ(params.max_new_tokens(), 11u);  // the tensor over the JSON
  EXPECT_EQ(std::vector<std::string>(params.stop().begin(), params.stop().end()),
            (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(plan->stream);
  EXPECT_FALSE(plan->include_prompt_text);  // streamed: deltas only
}

TEST(InferPlan, InputIdsAskForLogitsOrOutputIds) {
  inference::ModelInferRequest request;
  AddRaw(&request, "input_ids", "INT64", {1, 3},
         RawOf<int64_t>(4) + RawOf<int64_t>(5) + RawOf<int64_t>(6));
  auto plan = PlanInferRequest(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kind, InferPlan::Kind::kGenerate);
  EXPECT_TRUE(plan->output_ids);
  EXPECT_EQ(plan->generate.prompt_token_ids_size(), 3);
  request.add_outputs()->set_name("logits");
  plan = PlanInferRequest(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kind, InferPlan::Kind::kLogits);
  EXPECT_EQ(plan->forward.token_ids_size(), 3);
  EXPECT_FALSE(plan->forward.all_positions());
}

TEST(InferPlan, RefusalsNameTheTensorOrParameter) {
  inference::ModelInferRequest wrong_type;
  AddRaw(&wrong_type, "text_input", "INT32", {1}, RawOf<int32_t>(1));
  ExpectRefused(wrong_type, {"input 'text_input'", "INT32", "BYTES"});

  inference::ModelInferRequest mixed;
  AddRaw(&mixed, "text_input", "BYTES", {1}, Framed({"hi"}));
  AddInput(&mixed, "max_tokens", "INT32", {1});  // one raw entry for two inputs
  ExpectRefused(mixed, {"raw_input_contents", "1 entries for 2 inputs"});

  inference::ModelInferRequest count;
  AddInput(&count, "text_input", "BYTES", {1, 2})->mutable_contents()->add_bytes_contents("x");
  ExpectRefused(count, {"input 'text_input'", "holds 2 element(s)", "have 1"});

  inference::ModelInferRequest half;
  AddInput(&half, "text_input", "BYTES", {1})->mutable_contents()->add_bytes_contents("x");
  AddInput(&half, "temperature", "FP16", {1});
  ExpectRefused(half, {"input 'temperature'", "FP16", "raw_input_contents"});

  inference::ModelInferRequest negative;
  AddRaw(&negative, "text_input", "BYTES", {-1}, "");
  ExpectRefused(negative, {"input 'text_input'", "negative"});

  inference::ModelInferRequest twice;
  AddRaw(&twice, "text_input", "BYTES", {1}, Framed({"a"}));
  AddRaw(&twice, "text_input", "BYTES", {1}, Framed({"b"}));
  ExpectRefused(twice, {"input 'text_input'", "more than once"});

  inference::ModelInferRequest unknown_parameter;
  AddRaw(&unknown_parameter, "text_input", "BYTES", {1}, Framed({"a"}));
  (*unknown_parameter.mutable_parameters())["temprature"].set_double_param(1);
  ExpectRefused(unknown_parameter, {"parameters.temprature", "not a setting"});

  inference::ModelInferRequest bool_as_text;
  AddRaw(&bool_as_text, "text_input", "BYTES", {1}, Framed({"a"}));
  AddRaw(&bool_as_text, "stream", "BYTES", {1}, Framed({"maybe"}));
  ExpectRefused(bool_as_text, {"input 'stream'", "boolean"});

  inference::ModelInferRequest json_array;
  AddRaw(&json_array, "text_input", "BYTES", {1}, Framed({"a"}));
  AddRaw(&json_array, "sampling_parameters", "BYTES", {1}, Framed({"[1, 2]"}));
  ExpectRefused(json_array, {"sampling_parameters", "JSON object"});

  inference::ModelInferRequest nan;
  AddRaw(&nan, "text_input", "BYTES", {1}, Framed({"a"}));
  AddRaw(&nan, "temperature", "FP32", {1}, RawOf<float>(std::numeric_limits<float>::quiet_NaN()));
  ExpectRefused(nan, {"input 'temperature'", "finite"});

  inference::ModelInferRequest empty;
  AddRaw(&empty, "text_input", "BYTES", {1}, Framed({""}));
  ExpectRefused(empty, {"input 'text_input'", "empty"});
}

TEST(InferRequestFuzzEntryPoint, SavedInputsStillPass) {
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PLACER_INFER_REQUEST_REGRESSIONS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    fuzz::FuzzInferRequest(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    ++replayed;
  }
  EXPECT_GT(replayed, 0);
}

}  // namespace
}  // namespace placer::server::oip
