// The Open Inference Protocol's unary RPCs against a real placerd, through stubs generated from
// Triton's own grpc_service.proto: liveness, readiness and metadata, Triton RPCs placer does
// not serve, ModelInfer's text and ids equal to placer.v1 Generate's, logits equal to
// Forward's bit for bit, and every refusal naming the tensor or parameter.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/e2e/oip_daemon.h"

namespace placer::testing {
namespace {

using OipUnary = OipDaemon;

constexpr char kPrompt[] = "Hello world, said the tiny model";

v1::GenerateRequest GreedyGenerate(const std::string& prompt, uint32_t tokens) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  request.mutable_params()->set_max_new_tokens(tokens);
  request.mutable_params()->set_temperature(0);
  request.mutable_params()->set_ignore_eos(true);
  return request;
}

// A greedy request shaped like the TensorRT-LLM backend's clients: [1,1] tensors, raw data.
InferRequestBuilder GreedyInfer(const std::string& prompt, int32_t tokens, bool raw = true) {
  InferRequestBuilder builder(OipDaemon::kModel, raw);
  builder.Bytes("text_input", {prompt})
      .Int32("max_tokens", {tokens})
      .Fp32("temperature", 0)
      .Bool("ignore_eos", true);
  return builder;
}

grpc::Status InferStatus(const inference::ModelInferRequest& request) {
  inference::ModelInferResponse response;
  return OipDaemon::Oip().Infer(request, &response);
}

TEST_F(OipUnary, LivenessReadinessAndMetadata) {
  OipClient oip = Oip();
  inference::ServerLiveResponse live;
  ASSERT_TRUE(oip.stub().ServerLive(Oip().Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(oip.stub().ServerReady(Oip().Context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());

  inference::ModelReadyRequest model_ready;
  model_ready.set_name(kModel);
  inference::ModelReadyResponse model_ready_response;
  ASSERT_TRUE(
      oip.stub().ModelReady(Oip().Context().get(), model_ready, &model_ready_response).ok());
  EXPECT_TRUE(model_ready_response.ready());
  model_ready.set_version("1");
  EXPECT_TRUE(
      oip.stub().ModelReady(Oip().Context().get(), model_ready, &model_ready_response).ok());
  model_ready.set_version("2");
  EXPECT_EQ(
      oip.stub().ModelReady(Oip().Context().get(), model_ready, &model_ready_response).error_code(),
      grpc::StatusCode::NOT_FOUND);
  model_ready.set_name("gpt-17");
  model_ready.clear_version();
  const grpc::Status other =
      oip.stub().ModelReady(Oip().Context().get(), model_ready, &model_ready_response);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(other.error_message().find("gpt-17"), std::string::npos) << other.error_message();

  inference::ServerMetadataResponse server;
  ASSERT_TRUE(oip.stub().ServerMetadata(Oip().Context().get(), {}, &server).ok());
  EXPECT_EQ(server.name(), "placer");
  EXPECT_FALSE(server.version().empty());
  EXPECT_EQ(std::vector<std::string>(server.extensions().begin(), server.extensions().end()),
            std::vector<std::string>{"parameters"});

  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name(kModel);
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(oip.stub().ModelMetadata(Oip().Context().get(), metadata_request, &metadata).ok());
  EXPECT_EQ(metadata.name(), kModel);
  ASSERT_EQ(metadata.versions_size(), 1);
  EXPECT_EQ(metadata.versions(0), "1");
  EXPECT_NE(metadata.platform().find("placer"), std::string::npos) << metadata.platform();
  std::map<std::string, std::string> inputs, outputs;
  for (const auto& input : metadata.inputs()) inputs[input.name()] = input.datatype();
  for (const auto& output : metadata.outputs()) outputs[output.name()] = output.datatype();
  EXPECT_EQ(inputs["text_input"], "BYTES");
  EXPECT_EQ(inputs["input_ids"], "INT32");
  EXPECT_EQ(inputs["sampling_parameters"], "BYTES");
  EXPECT_EQ(inputs["stream"], "BOOL");
  EXPECT_EQ(outputs["text_output"], "BYTES");
  EXPECT_EQ(outputs["logits"], "FP32");
  ASSERT_NE(metadata.outputs(0).shape_size(), 0);
  EXPECT_EQ(metadata.outputs(0).shape(0), -1);
}

TEST_F(OipUnary, TritonRpcsPlacerDoesNotServeAreUnimplemented) {
  OipClient oip = Oip();
  inference::ModelConfigRequest config_request;
  config_request.set_name(kModel);
  inference::ModelConfigResponse config;
  EXPECT_EQ(oip.stub().ModelConfig(Oip().Context().get(), config_request, &config).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  inference::ModelStatisticsResponse statistics;
  EXPECT_EQ(oip.stub().ModelStatistics(Oip().Context().get(), {}, &statistics).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  inference::RepositoryIndexResponse index;
  EXPECT_EQ(oip.stub().RepositoryIndex(Oip().Context().get(), {}, &index).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  inference::LogSettingsResponse log;
  EXPECT_EQ(oip.stub().LogSettings(Oip().Context().get(), {}, &log).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(OipUnary, GreedyTextAndIdsEqualGenerates) {
  const auto [generate_ids, generate_text] = Generate(GreedyGenerate(kPrompt, 12));
  ASSERT_EQ(generate_ids.size(), 12u);

  inference::ModelInferResponse response;
  const auto request = GreedyInfer(kPrompt, 12)
                           .Bool("exclude_input_in_output", true)
                           .Output("text_output")
                           .Output("output_ids")
                           .Id("req-1")
                           .request();
  ASSERT_TRUE(Oip().Infer(request, &response).ok());
  EXPECT_EQ(response.model_name(), kModel);
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "req-1");
  EXPECT_EQ(BytesOutput(response, "text_output"), std::vector<std::string>{generate_text});
  EXPECT_EQ(Int32Output(response, "output_ids"), generate_ids);
  const auto* text = FindOutput(response, "text_output");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(std::vector<int64_t>(text->shape().begin(), text->shape().end()),
            (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(response.parameters().at("finish_reason").string_param(), "length");
  EXPECT_EQ(response.parameters().at("completion_tokens").int64_param(), 12);

  // Without exclude_input_in_output a whole answer repeats the prompt (the vLLM backend's way).
  ASSERT_TRUE(Oip().Infer(GreedyInfer(kPrompt, 12).request(), &response).ok());
  EXPECT_EQ(BytesOutput(response, "text_output"),
            std::vector<std::string>{kPrompt + generate_text});
}

TEST_F(OipUnary, TypedContentsAndShapeOneAnswerAsRawDoes) {
  inference::ModelInferResponse raw, typed, flat;
  ASSERT_TRUE(Oip().Infer(GreedyInfer(kPrompt, 6).request(), &raw).ok());
  ASSERT_TRUE(Oip().Infer(GreedyInfer(kPrompt, 6, /*raw=*/false).request(), &typed).ok());
  InferRequestBuilder shape_one(kModel);
  shape_one.Bytes("text_input", {kPrompt}, {1})
      .Int32("max_tokens", {6}, {1})
      .Fp32("temperature", 0, {1})
      .Bool("ignore_eos", true, {1});
  ASSERT_TRUE(Oip().Infer(shape_one.request(), &flat).ok());
  EXPECT_EQ(BytesOutput(raw, "text_output"), BytesOutput(typed, "text_output"));
  EXPECT_EQ(BytesOutput(raw, "text_output"), BytesOutput(flat, "text_output"));
  EXPECT_EQ(FindOutput(flat, "text_output")->shape_size(), 1);
}

TEST_F(OipUnary, SampledWithSeedEqualsGenerateAndSamplingParametersJsonWorks) {
  v1::GenerateRequest generate = GreedyGenerate(kPrompt, 10);
  generate.mutable_params()->set_temperature(0.9f);
  generate.mutable_params()->set_top_k(20);
  generate.mutable_params()->set_top_p(0.95f);
  generate.mutable_params()->set_seed(1234);
  const auto [generate_ids, generate_text] = Generate(generate);

  // As the vLLM backend's sample client writes it: numbers as strings in the JSON.
  InferRequestBuilder json(kModel);
  json.Bytes("text_input", {kPrompt})
      .Bytes("sampling_parameters",
             {R"({"temperature": "0.9", "top_k": 20, "top_p": "0.95", "seed": 1234,)"
              R"( "max_tokens": "10", "ignore_eos": true})"})
      .Bool("exclude_input_in_output", true)
      .Output("output_ids")
      .Output("text_output");
  inference::ModelInferResponse response;
  ASSERT_TRUE(Oip().Infer(json.request(), &response).ok());
  EXPECT_EQ(Int32Output(response, "output_ids"), generate_ids);
  EXPECT_EQ(BytesOutput(response, "text_output"), std::vector<std::string>{generate_text});

  // The same settings as request parameters.
  InferRequestBuilder parameters(kModel);
  parameters.Bytes("text_input", {kPrompt})
      .Parameter("temperature", 0.9)
      .Parameter("top_k", int64_t{20})
      .Parameter("top_p", 0.95)
      .Parameter("seed", int64_t{1234})
      .Parameter("max_tokens", int64_t{10})
      .Parameter("ignore_eos", true)
      .Output("output_ids");
  ASSERT_TRUE(Oip().Infer(parameters.request(), &response).ok());
  EXPECT_EQ(Int32Output(response, "output_ids"), generate_ids);
}

TEST_F(OipUnary, InputIdsGiveOutputIdsEqualToGenerates) {
  v1::GenerateRequest generate;
  for (const int32_t id : {5, 17, 42, 99}) generate.add_prompt_token_ids(id);
  generate.mutable_params()->set_max_new_tokens(8);
  generate.mutable_params()->set_temperature(0);
  generate.mutable_params()->set_ignore_eos(true);
  const auto generated = Generate(generate).first;

  InferRequestBuilder ids(kModel);
  ids.Int64("input_ids", {5, 17, 42, 99}, {1, 4}).Int32("max_tokens", {8}).Bool("ignore_eos", true);
  inference::ModelInferResponse response;
  ASSERT_TRUE(Oip().Infer(ids.request(), &response).ok());
  EXPECT_EQ(Int32Output(response, "output_ids"), generated);
  const auto* output = FindOutput(response, "output_ids");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output->datatype(), "INT32");
  EXPECT_EQ(std::vector<int64_t>(output->shape().begin(), output->shape().end()),
            (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(FindOutput(response, "text_output"), nullptr);
}

TEST_F(OipUnary, LogitsEqualForwardsBitForBit) {
  const std::vector<int32_t> tokens = {3, 14, 15, 92, 65};
  for (const bool all_positions : {false, true}) {
    v1::ForwardRequest forward;
    for (const int32_t id : tokens) forward.add_token_ids(id);
    forward.set_all_positions(all_positions);
    auto expected = Placer().Forward(forward);
    ASSERT_TRUE(expected.ok()) << expected.status();

    InferRequestBuilder logits(kModel, /*raw=*/all_positions);
    logits.Int32("input_ids", tokens, {5}).Output("logits");
    if (all_positions) logits.Bool("all_positions", true, {1});
    inference::ModelInferResponse response;
    const grpc::Status status = Oip().Infer(logits.request(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const auto* output = FindOutput(response, "logits");
    ASSERT_NE(output, nullptr);
    EXPECT_EQ(output->datatype(), "FP32");
    EXPECT_EQ(
        std::vector<int64_t>(output->shape().begin(), output->shape().end()),
        std::vector<int64_t>(expected->logits().shape().begin(), expected->logits().shape().end()));
    EXPECT_EQ(RawOutput(response, "logits"), expected->logits().data()) << all_positions;
  }
}

TEST_F(OipUnary, RawTensorsUpToMaxRequestBytesAreRead) {
  // 3 MiB of raw BYTES fit the default --max-request-bytes (4 MiB): read, then refused for
  // what they hold; 5 MiB do not.
  const grpc::Status big =
      InferStatus(GreedyInfer("hi", 2).Bytes("stop", {std::string(3 << 20, 'x')}, {1}).request());
  EXPECT_EQ(big.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << big.error_message();
  EXPECT_NE(big.error_message().find("stop[0]: 3145728 bytes"), std::string::npos)
      << big.error_message();
  const grpc::Status too_big =
      InferStatus(GreedyInfer("hi", 2).Bytes("stop", {std::string(5 << 20, 'x')}, {1}).request());
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << too_big.error_message();
}

struct Refusal {
  const char* what;
  inference::ModelInferRequest request;
  grpc::StatusCode code;
  std::vector<std::string> says;  // every one of these is in the message
};

TEST_F(OipUnary, BadRequestsAreRefusedNamingTheTensorOrParameter) {
  std::vector<Refusal> refusals;
  refusals.push_back({"unknown model",
                      InferRequestBuilder("gpt-17").Bytes("text_input", {"hi"}).request(),
                      grpc::StatusCode::NOT_FOUND,
                      {"gpt-17"}});
  inference::ModelInferRequest version = GreedyInfer("hi", 2).request();
  version.set_model_version("3");
  refusals.push_back({"unknown version", version, grpc::StatusCode::NOT_FOUND, {"'3'"}});
  refusals.push_back({"unknown input",
                      GreedyInfer("hi", 2).Int32("beam_width", {2}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"beam_width", "not an input"}});
  refusals.push_back({"text as INT32",
                      InferRequestBuilder(kModel).Int32("text_input", {7}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"text_input", "INT32", "BYTES"}});
  refusals.push_back({"two prompts",
                      InferRequestBuilder(kModel).Bytes("text_input", {"a", "b"}, {2}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"text_input", "[2]"}});
  refusals.push_back({"no prompt",
                      InferRequestBuilder(kModel).Int32("max_tokens", {3}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"text_input", "input_ids"}});
  inference::ModelInferRequest framing = GreedyInfer("hi", 2).request();
  framing.set_raw_input_contents(0, std::string("\x40\0\0\0hi", 6));  // says 64 bytes
  refusals.push_back({"bad BYTES framing",
                      framing,
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"text_input", "64 bytes"}});
  inference::ModelInferRequest short_raw = GreedyInfer("hi", 2).request();
  short_raw.set_raw_input_contents(1, "\1\0");  // max_tokens INT32 needs 4 bytes
  refusals.push_back(
      {"short INT32", short_raw, grpc::StatusCode::INVALID_ARGUMENT, {"max_tokens", "needs 4"}});
  refusals.push_back({"bad JSON",
                      GreedyInfer("hi", 2).Bytes("sampling_parameters", {"{\"top_p\": "}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"sampling_parameters", "JSON"}});
  refusals.push_back(
      {"JSON key",
       GreedyInfer("hi", 2).Bytes("sampling_parameters", {R"({"best_of": 4})"}).request(),
       grpc::StatusCode::INVALID_ARGUMENT,
       {"sampling_parameters.best_of"}});
  refusals.push_back({"top_p out of range",
                      GreedyInfer("hi", 2).Fp32("top_p", 1.5f).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"top_p", "(0, 1]"}});
  refusals.push_back({"top_k beyond vocabulary",
                      GreedyInfer("hi", 2).Int32("top_k", {1 << 30}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"top_k", "vocabulary"}});
  refusals.push_back({"negative max_tokens",
                      GreedyInfer("hi", 2).Parameter("max_tokens", int64_t{-4}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"parameters.max_tokens"}});
  refusals.push_back({"too many tokens",
                      GreedyInfer("hi", 1 << 20).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"max_tokens", "positions"}});
  refusals.push_back({"token outside vocabulary",
                      InferRequestBuilder(kModel).Int32("input_ids", {1, 1 << 30}, {2}).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"input_ids", "vocabulary"}});
  refusals.push_back(
      {"logits of a token outside the vocabulary",
       InferRequestBuilder(kModel).Int32("input_ids", {1, 1 << 30}, {2}).Output("logits").request(),
       grpc::StatusCode::INVALID_ARGUMENT,
       {"input 'input_ids' element [1]", "vocabulary"}});
  refusals.push_back({"unknown output",
                      GreedyInfer("hi", 2).Output("embeddings").request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"embeddings", "not an output"}});
  refusals.push_back({"stream on ModelInfer",
                      GreedyInfer("hi", 2).Bool("stream", true).request(),
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"ModelStreamInfer"}});
  inference::ModelInferRequest raw_count = GreedyInfer("hi", 2).request();
  raw_count.mutable_raw_input_contents()->RemoveLast();
  refusals.push_back(
      {"raw entries", raw_count, grpc::StatusCode::INVALID_ARGUMENT, {"raw_input_contents"}});
  inference::ModelInferRequest bad_utf8 = GreedyInfer("hi", 2).request();
  bad_utf8.set_raw_input_contents(0, FrameBytes({"caf\xc3"}));
  refusals.push_back({"invalid UTF-8 prompt",
                      bad_utf8,
                      grpc::StatusCode::INVALID_ARGUMENT,
                      {"text_input", "UTF-8"}});

  for (const Refusal& refusal : refusals) {
    const grpc::Status status = InferStatus(refusal.request);
    EXPECT_EQ(status.error_code(), refusal.code) << refusal.what << ": " << status.error_message();
    for (const std::string& part : refusal.says) {
      EXPECT_NE(status.error_message().find(part), std::string::npos)
          << refusal.what << ": '" << status.error_message() << "' does not say '" << part << "'";
    }
  }
  EXPECT_TRUE(daemon_->running()) << daemon_->Log();
}

}  // namespace
}  // namespace placer::testing
