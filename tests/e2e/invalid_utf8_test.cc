// Bytes a typed client cannot send: requests serialized by hand and sent through a generic
// gRPC stub to a real placerd. Text fields holding invalid UTF-8 are INVALID_ARGUMENT naming
// the field and the byte (protobuf alone would fail the parse, and gRPC would answer a bare
// INTERNAL before any handler ran); bytes that are no message at all are INVALID_ARGUMENT too.
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// A length-delimited field (wire type 2), short enough for one-byte tags and lengths.
std::string Field(int number, const std::string& bytes) {
  EXPECT_LT(number, 16);
  EXPECT_LT(bytes.size(), 128u);
  return std::string(1, static_cast<char>(number << 3 | 2)) +
         std::string(1, static_cast<char>(bytes.size())) + bytes;
}

class InvalidUtf8 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("placer-utf8-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_->string() + " --arch llama --preset tiny --seed 5");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    ports_ = new StartedDaemon(PickPorts());
    daemon_ = new DaemonProcess(DaemonArgs(*ports_, {"--model", dir_->string()}));
    ASSERT_TRUE(WaitServing(*ports_, seconds(30))) << daemon_->Log();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete ports_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  // One request message as raw bytes; the status, and the one response message if any.
  static grpc::Status Call(const std::string& method, const std::string& wire,
                           std::string* response_bytes = nullptr) {
    auto channel = grpc::CreateChannel(ports_->target(), grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(30));
    grpc::CompletionQueue queue;
    grpc::Slice slice(wire);
    const grpc::ByteBuffer request(&slice, 1);
    // A unary call: enough for Generate too when the answer is an error and no messages.
    auto call = stub.PrepareUnaryCall(&context, "/placer.v1.Placer/" + method, request, &queue);
    call->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue.Next(&tag, &ok));
    if (response_bytes != nullptr && status.ok()) {
      std::vector<grpc::Slice> slices;
      EXPECT_TRUE(response.Dump(&slices).ok());
      for (const grpc::Slice& s : slices) {
        response_bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
    return status;
  }

  static void ExpectInvalid(const std::string& method, const std::string& wire,
                            const std::string& message) {
    const grpc::Status status = Call(method, wire);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_EQ(status.error_message(), message);
  }

  static fs::path* dir_;
  static StartedDaemon* ports_;
  static DaemonProcess* daemon_;
};
fs::path* InvalidUtf8::dir_ = nullptr;
StartedDaemon* InvalidUtf8::ports_ = nullptr;
DaemonProcess* InvalidUtf8::daemon_ = nullptr;

constexpr char kWhy[] = " (text must be well-formed UTF-8)";

TEST_F(InvalidUtf8, PromptNamesTheFieldAndByte) {
  ExpectInvalid("Generate", Field(1, "Hello, \xff world"),
                std::string("prompt: invalid UTF-8 at byte 7") + kWhy);
  // A truncated 3-byte sequence, an overlong '/', a surrogate, above U+10FFFF.
  ExpectInvalid("Generate", Field(1, "caf\xc3\xa9 \xe2\x82"),
                std::string("prompt: invalid UTF-8 at byte 6") + kWhy);
  ExpectInvalid("Generate", Field(1, "\xc0\xaf"),
                std::string("prompt: invalid UTF-8 at byte 0") + kWhy);
  ExpectInvalid("Generate", Field(1, "ab\xed\xa0\x80"),
                std::string("prompt: invalid UTF-8 at byte 2") + kWhy);
  ExpectInvalid("Generate", Field(1, "\xf4\x90\x80\x80"),
                std::string("prompt: invalid UTF-8 at byte 0") + kWhy);
}

TEST_F(InvalidUtf8, StopStringsAndRequestIdAreNamedToo) {
  // params (field 3) holding stop (field 6) twice: the second one is bad.
  ExpectInvalid("Generate", Field(1, "hi") + Field(3, Field(6, "ok") + Field(6, "x\x80")),
                std::string("params.stop[1]: invalid UTF-8 at byte 1") + kWhy);
  ExpectInvalid("Generate", Field(1, "hi") + Field(4, "req-\xfe"),
                std::string("request_id: invalid UTF-8 at byte 4") + kWhy);
  ExpectInvalid("Tokenize", Field(1, "abc\xed\xa0\x80"),
                std::string("text: invalid UTF-8 at byte 3") + kWhy);
}

TEST_F(InvalidUtf8, BytesThatAreNoMessageAreInvalidArgument) {
  // A length that runs past the end.
  ExpectInvalid("Generate", "\x0a\x7f" "abc",
                "the request is not a well-formed placer.v1.GenerateRequest message (protobuf "
                "wire format)");
  ExpectInvalid("Forward", "\x0a\x05\x01",
                "the request is not a well-formed placer.v1.ForwardRequest message (protobuf "
                "wire format)");
}

TEST_F(InvalidUtf8, ValidTextStillGoesThroughAndNothingLeaksToStderr) {
  std::string response;
  const grpc::Status status = Call("Tokenize", Field(1, "R\xc3\xa9sum\xc3\xa9 \xf0\x9f\x99\x82"),
                                   &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(tokens.ParseFromString(response));
  EXPECT_GT(tokens.token_ids_size(), 0);
  // Typed clients are unaffected: a Generate with text streams as before.
  client::PlacerClient client({ports_->target(), seconds(30)});
  v1::GenerateRequest request;
  request.set_prompt("Hello, placer!");
  request.mutable_params()->set_max_new_tokens(3);
  request.mutable_params()->set_ignore_eos(true);
  std::string finish_reason;
  const absl::Status generated = client.Generate(request, [&](const v1::GenerateResponse& r) {
    if (!r.finish_reason().empty()) finish_reason = r.finish_reason();
  });
  ASSERT_TRUE(generated.ok()) << generated;
  EXPECT_EQ(finish_reason, "length");
  // protobuf's own "contains invalid UTF-8" line would bypass placerd's log format.
  EXPECT_EQ(daemon_->Log().find("libprotobuf"), std::string::npos) << daemon_->Log();
}

}  // namespace
}  // namespace placer::testing
