// The Open Inference Protocol on placerds started for one thing each: --model-name, a full
// queue (RESOURCE_EXHAUSTED on ModelInfer and in a stream), and TLS, through stubs generated
// from Triton's own grpc_service.proto.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"
#include "tests/e2e/oip_client.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class OipLimits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("placer-oip-limits-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    const CommandResult made = RunCommand(
        std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " + (*dir_ / "model").string() +
        " --arch llama --preset tiny --seed 3 --max-positions 4096");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string model() { return (*dir_ / "model").string(); }

  static inline fs::path* dir_ = nullptr;
};

inference::ModelInferRequest Long(const std::string& name, const std::string& id, bool stream) {
  InferRequestBuilder builder(name);
  builder.Id(id)
      .Bytes("text_input", {"a long story"})
      .Int32("max_tokens", {4000})
      .Bool("ignore_eos", true)
      .Bool("stream", stream);
  return builder.request();
}

TEST_F(OipLimits, ModelNameOverridesTheDirectorysAndAFullQueueIsResourceExhausted) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", model(), "--model-name", "served-llama",
                                          "--max-batch-size", "1", "--max-queue", "1"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  OipClient oip(ports.target(), "");
  inference::ModelReadyRequest ready;
  ready.set_name("served-llama");
  inference::ModelReadyResponse answer;
  ASSERT_TRUE(oip.stub().ModelReady(oip.Context().get(), ready, &answer).ok());
  EXPECT_TRUE(answer.ready());
  ready.set_name("model");  // the directory's name, overridden
  EXPECT_EQ(oip.stub().ModelReady(oip.Context().get(), ready, &answer).error_code(),
            grpc::StatusCode::NOT_FOUND);

  // One stream holds the one place of the batch and the one place of the queue.
  auto context = oip.Context();
  auto stream = oip.stub().ModelStreamInfer(context.get());
  ASSERT_TRUE(stream->Write(Long("served-llama", "first", true)));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  ASSERT_TRUE(stream->Write(Long("served-llama", "second", true)));
  ASSERT_TRUE(WaitUntil(
      [&] { return ScrapeValue(ports.metrics_port, "placer_queue_depth").value_or(0) == 1; },
      seconds(10)));
  // On the same stream: beyond --max-batch-size plus --max-queue.
  ASSERT_TRUE(stream->Write(Long("served-llama", "third", true)));
  bool refused_in_stream = false;
  while (stream->Read(&response)) {
    if (response.infer_response().id() == "second") {
      EXPECT_EQ(response.error_message(), "") << "the second waits in the queue";
    }
    if (response.infer_response().id() != "third") continue;
    EXPECT_NE(response.error_message().find("RESOURCE_EXHAUSTED"), std::string::npos)
        << response.error_message();
    refused_in_stream = true;
    break;
  }
  EXPECT_TRUE(refused_in_stream);
  // From another call: the engine's queue is full.
  inference::ModelInferResponse unary;
  const grpc::Status full = oip.Infer(Long("served-llama", "fourth", false), &unary);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
  context->TryCancel();
  stream->Finish();
}

TEST_F(OipLimits, AnOpenStreamWithNothingRunningDoesNotHoldUpTheDrain) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--model", model(), "--drain-timeout", "30s"}));
  ASSERT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
  OipClient oip(ports.target(), "");
  auto context = oip.Context();
  auto stream = oip.stub().ModelStreamInfer(context.get());
  InferRequestBuilder short_request("model");
  short_request.Id("done").Bytes("text_input", {"brief"}).Int32("max_tokens", {2});
  ASSERT_TRUE(stream->Write(short_request.request()));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  // The stream stays open, idle, as tritonclient's does between requests.
  const auto signalled = std::chrono::steady_clock::now();
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.WaitExit(seconds(20)), 0) << daemon.Log();
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, seconds(10)) << daemon.Log();
  EXPECT_FALSE(stream->Finish().ok());
}

TEST_F(OipLimits, TheProtocolIsServedOverTls) {
  const fs::path pki = *dir_ / "pki";
  fs::create_directories(pki);
  const CommandResult made = RunCommand(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      (pki / "server.key").string() + " -out " + (pki / "server.pem").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(
      DaemonArgs(ports, {"--model", model(), "--tls-cert", (pki / "server.pem").string(),
                         "--tls-key", (pki / "server.key").string()}));
  ASSERT_TRUE(WaitUntil([&] { return daemon.Log().find("listening on") != std::string::npos; },
                        seconds(30)))
      << daemon.Log();
  std::ifstream in(pki / "server.pem");
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = pem.str();
  OipClient secure(ports.target(), "", grpc::SslCredentials(tls));
  ASSERT_TRUE(WaitUntil(
      [&] {
        inference::ServerReadyResponse ready;
        return secure.stub().ServerReady(secure.Context().get(), {}, &ready).ok() && ready.ready();
      },
      seconds(60)))
      << daemon.Log();
  InferRequestBuilder request("model");
  request.Bytes("text_input", {"over TLS"}).Int32("max_tokens", {3});
  inference::ModelInferResponse response;
  ASSERT_TRUE(secure.Infer(request.request(), &response).ok());
  EXPECT_EQ(response.model_name(), "model");

  OipClient plaintext(ports.target(), "");
  inference::ServerLiveResponse live;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(5));
  EXPECT_FALSE(plaintext.stub().ServerLive(&context, {}, &live).ok());
}

}  // namespace
}  // namespace placer::testing
