// Triton's ModelStreamInfer against a real placerd, through stubs generated from Triton's own
// grpc_service.proto: streamed deltas that add up to the unary answer, the final-response
// flag, errors answered in the stream by request id, 8 requests on one stream and 8 streams
// batched with the same outputs as alone, cancellation giving the KV blocks back, the token
// check, request ids and the request metrics.
#include <gtest/gtest.h>

#include <thread>

#include "tests/e2e/exposition.h"
#include "tests/e2e/oip_daemon.h"

namespace placer::testing {
namespace {

using OipStream = OipDaemon;

inference::ModelInferRequest StreamRequest(const std::string& id, const std::string& prompt,
                                           int32_t tokens, bool stream = true) {
  InferRequestBuilder builder(OipDaemon::kModel);
  builder.Id(id)
      .Bytes("text_input", {prompt})
      .Bool("stream", stream)
      .Int32("max_tokens", {tokens})
      .Fp32("temperature", 0)
      .Bool("ignore_eos", true)
      .Output("text_output")
      .Output("output_ids");
  return builder.request();
}

// The unary answer (prompt excluded) that a stream of the same request must add up to.
std::pair<std::string, std::vector<int32_t>> UnaryAnswer(const std::string& prompt,
                                                         int32_t tokens) {
  inference::ModelInferRequest request = StreamRequest("alone", prompt, tokens, false);
  InferRequestBuilder exclude(OipDaemon::kModel);
  exclude.Bool("exclude_input_in_output", true);
  *request.add_inputs() = exclude.request().inputs(0);
  *request.add_raw_input_contents() = exclude.request().raw_input_contents(0);
  inference::ModelInferResponse response;
  const grpc::Status status = OipDaemon::Oip().Infer(request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return {BytesOutput(response, "text_output").value_or(std::vector<std::string>{""}).at(0),
          Int32Output(response, "output_ids").value_or(std::vector<int32_t>{})};
}

const std::vector<std::string> kPrompts = {"The quick brown fox",     "Once upon a time",
                                           "In a hole in the ground", "It was a bright cold day",
                                           "Call me Ishmael",         "All happy families",
                                           "Many years later",        "The sky above the port"};

TEST_F(OipStream, DeltasAddUpToTheUnaryAnswerAndOnlyTheLastIsFinal) {
  const auto [text, ids] = UnaryAnswer(kPrompts[0], 14);
  ASSERT_EQ(ids.size(), 14u);
  const OipClient::StreamOutcome outcome = Oip().Stream({StreamRequest("s1", kPrompts[0], 14)});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  const StreamedText streamed = CollectStream(outcome.responses, "s1");
  EXPECT_EQ(streamed.error, "");
  EXPECT_EQ(streamed.text, text);
  EXPECT_EQ(streamed.ids, ids);
  EXPECT_EQ(streamed.responses, 15);  // one a token, then the final one
  EXPECT_TRUE(streamed.final_flag_only_on_last);

  // stream: false on the stream: one whole answer.
  const auto whole = Oip().Stream({StreamRequest("w1", kPrompts[0], 14, /*stream=*/false)});
  ASSERT_TRUE(whole.status.ok());
  ASSERT_EQ(whole.responses.size(), 1u);
  EXPECT_EQ(CollectStream(whole.responses, "w1").ids, ids);
}

TEST_F(OipStream, SampledStreamsGiveGeneratesTokensForTheSameSeed) {
  v1::GenerateRequest generate;
  generate.set_prompt(kPrompts[5]);
  generate.mutable_params()->set_max_new_tokens(16);
  generate.mutable_params()->set_temperature(0.8f);
  generate.mutable_params()->set_top_k(40);
  generate.mutable_params()->set_seed(77);
  generate.mutable_params()->set_ignore_eos(true);
  const auto [ids, text] = Generate(generate);
  InferRequestBuilder sampled(kModel);
  sampled.Id("seeded")
      .Bytes("text_input", {kPrompts[5]})
      .Bool("stream", true)
      .Bytes("sampling_parameters", {R"({"temperature": 0.8, "top_k": 40, "seed": 77,)"
                                     R"( "max_tokens": 16, "ignore_eos": true})"})
      .Output("text_output")
      .Output("output_ids");
  const auto outcome = Oip().Stream({sampled.request()});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  const StreamedText streamed = CollectStream(outcome.responses, "seeded");
  EXPECT_EQ(streamed.ids, ids);
  EXPECT_EQ(streamed.text, text);
}

// Requests shaped as the vLLM backend's sample client (samples/client.py) makes them with
// tritonclient: [1] tensors in raw_input_contents, numbers as strings in sampling_parameters,
// text_output asked for, every prompt on one stream, each with its id. Seeded (a number as a
// string too): unseeded, the random test model (1410 of its 2048 ids are reserved special
// tokens, left out of text as vLLM leaves them) sampled only special tokens for one prompt in
// about one run of six, and an empty text was then the right answer.
TEST_F(OipStream, AClientWrittenForTheVllmBackendGeneratesText) {
  std::vector<inference::ModelInferRequest> requests;
  for (std::size_t i = 0; i < 4; ++i) {
    InferRequestBuilder builder(kModel);
    builder.Id(std::to_string(i))
        .Bytes("text_input", {kPrompts[i]}, {1})
        .Bool("stream", true, {1})
        .Bytes("sampling_parameters",
               {R"({"temperature": "0.1", "top_p": "0.95", "max_tokens": "12", "seed": "11"})"},
               {1})
        .Bool("exclude_input_in_output", true, {1})
        .Output("text_output");
    requests.push_back(builder.request());
  }
  const auto outcome = Oip().Stream(requests);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const StreamedText streamed = CollectStream(outcome.responses, std::to_string(i));
    EXPECT_EQ(streamed.error, "");
    EXPECT_FALSE(streamed.text.empty()) << kPrompts[i];
    EXPECT_TRUE(streamed.final_flag_only_on_last);
    for (const auto& message : outcome.responses) {
      if (message.infer_response().id() != std::to_string(i)) continue;
      const auto* text = FindOutput(message.infer_response(), "text_output");
      ASSERT_NE(text, nullptr);
      EXPECT_EQ(text->datatype(), "BYTES");
      EXPECT_EQ(text->shape_size(), 1);
    }
  }
}

TEST_F(OipStream, ErrorsComeInTheStreamWithTheirIdAndTheStreamGoesOn) {
  inference::ModelInferRequest bad = StreamRequest("bad", kPrompts[1], 4);
  bad.mutable_inputs(0)->set_datatype("FP32");
  bad.set_raw_input_contents(0, std::string(4, '\0'));
  inference::ModelInferRequest other_model = StreamRequest("nowhere", kPrompts[1], 4);
  other_model.set_model_name("gpt-17");
  const auto outcome = Oip().Stream({bad, other_model, StreamRequest("good", kPrompts[1], 4)});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  const StreamedText refused = CollectStream(outcome.responses, "bad");
  EXPECT_NE(refused.error.find("INVALID_ARGUMENT"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("text_input"), std::string::npos) << refused.error;
  EXPECT_NE(CollectStream(outcome.responses, "nowhere").error.find("NOT_FOUND"), std::string::npos);
  const StreamedText good = CollectStream(outcome.responses, "good");
  EXPECT_EQ(good.error, "");
  EXPECT_EQ(good.ids.size(), 4u);
}

double BatchedSequences(int metrics_port, double* steps) {
  const auto sum = ScrapeValue(metrics_port, "placer_batch_size_sum");
  const auto count = ScrapeValue(metrics_port, "placer_batch_size_count");
  *steps = count.value_or(0);
  return sum.value_or(0);
}

TEST_F(OipStream, EightRequestsOnOneStreamAndEightStreamsAreBatchedWithTheSameOutputs) {
  std::vector<std::vector<int32_t>> alone;
  for (const std::string& prompt : kPrompts) alone.push_back(UnaryAnswer(prompt, 24).second);

  double steps_before = 0, steps_after = 0;
  const double sequences_before = BatchedSequences(ports_->metrics_port, &steps_before);
  std::vector<inference::ModelInferRequest> requests;
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    requests.push_back(StreamRequest("r" + std::to_string(i), kPrompts[i], 24));
  }
  const auto outcome = Oip().Stream(requests);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  const double sequences_after = BatchedSequences(ports_->metrics_port, &steps_after);
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    const StreamedText streamed = CollectStream(outcome.responses, "r" + std::to_string(i));
    EXPECT_EQ(streamed.ids, alone[i]) << kPrompts[i];
    EXPECT_TRUE(streamed.final_flag_only_on_last) << kPrompts[i];
  }
  // 8 x 24 tokens in far fewer steps than 8 x 24 one at a time: they shared forward passes.
  ASSERT_GT(steps_after, steps_before);
  EXPECT_GT((sequences_after - sequences_before) / (steps_after - steps_before), 2.0);

  std::vector<std::vector<int32_t>> streamed(kPrompts.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    clients.emplace_back([&, i] {
      const auto one = Oip().Stream({StreamRequest("t", kPrompts[i], 24)});
      EXPECT_TRUE(one.status.ok()) << one.status.error_message();
      streamed[i] = CollectStream(one.responses, "t").ids;
    });
  }
  for (std::thread& client : clients) client.join();
  for (std::size_t i = 0; i < kPrompts.size(); ++i) EXPECT_EQ(streamed[i], alone[i]) << i;
}

TEST_F(OipStream, ACancelledStreamStopsGeneratingAndGivesItsKvBlocksBack) {
  const auto used = [] {
    const auto samples =
        ScrapeValue(ports_->metrics_port, "placer_device_kv_cache_blocks", {{"state", "used"}});
    return samples.value_or(-1);
  };
  ASSERT_TRUE(WaitUntil([&] { return used() == 0; }, std::chrono::seconds(10)));
  OipClient oip = Oip();
  auto context = oip.Context();
  auto stream = oip.stub().ModelStreamInfer(context.get());
  ASSERT_TRUE(stream->Write(StreamRequest("long", kPrompts[2], 480)));
  inference::ModelStreamInferResponse response;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(used(), 0);
  context->TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitUntil([&] { return used() == 0; }, std::chrono::seconds(10))) << used();
}

TEST_F(OipStream, TheTokenIsCheckedAndRequestsAreCountedAndCarryTheirId) {
  OipClient anonymous(ports_->target(), "");
  inference::ServerLiveResponse live;
  grpc::ClientContext no_token;
  EXPECT_EQ(anonymous.stub().ServerLive(&no_token, {}, &live).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  inference::ModelInferResponse response;
  EXPECT_EQ(anonymous.Infer(StreamRequest("x", kPrompts[3], 2, false), &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  OipClient wrong(ports_->target(), "not-the-token");
  const auto refused = wrong.Stream({StreamRequest("x", kPrompts[3], 2)});
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_GE(ScrapeValue(ports_->metrics_port, "placer_auth_failures_total", {{"rpc", "ModelInfer"}})
                .value_or(0),
            1);

  auto context = Oip().Context();
  context->AddMetadata("x-request-id", "oip-trace-77");
  ASSERT_TRUE(Oip()
                  .stub()
                  .ModelInfer(context.get(), StreamRequest("y", kPrompts[3], 2, false), &response)
                  .ok());
  const auto echoed = context->GetServerInitialMetadata().find("x-request-id");
  ASSERT_NE(echoed, context->GetServerInitialMetadata().end());
  EXPECT_EQ(std::string(echoed->second.data(), echoed->second.size()), "oip-trace-77");
  EXPECT_TRUE(WaitUntil([&] { return daemon_->Log().find("oip-trace-77") != std::string::npos; },
                        std::chrono::seconds(5)));
  EXPECT_GE(ScrapeValue(ports_->metrics_port, "placer_requests_total",
                        {{"rpc", "ModelInfer"}, {"code", "OK"}})
                .value_or(0),
            1);
  ASSERT_TRUE(Oip().Stream({StreamRequest("z", kPrompts[3], 2)}).status.ok());
  EXPECT_GE(ScrapeValue(ports_->metrics_port, "placer_requests_total",
                        {{"rpc", "ModelStreamInfer"}, {"code", "OK"}})
                .value_or(0),
            1);
}

}  // namespace
}  // namespace placer::testing
