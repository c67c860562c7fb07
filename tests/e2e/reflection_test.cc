// Server reflection, as grpcurl uses it: list the services of a real placerd and fetch the
// descriptor of placer.v1.Placer. Its own binary, because the reflection messages generated
// here must not meet libgrpc++_reflection's copy in one process.
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <set>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

TEST(Reflection, ListsPlacerHealthAndReflectionAndDescribesThePlacerService) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, std::chrono::seconds(20)))
      << daemon.Log();

  auto stub = ServerReflection::NewStub(
      grpc::CreateChannel(ports.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);

  ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  ServerReflectionResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  std::set<std::string> services;
  for (const auto& service : listed.list_services_response().service()) {
    services.insert(service.name());
  }
  EXPECT_TRUE(services.count("placer.v1.Placer"));
  EXPECT_TRUE(services.count("grpc.health.v1.Health"));
  EXPECT_TRUE(services.count("grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_TRUE(services.count("inference.GRPCInferenceService"));

  ServerReflectionRequest describe;
  describe.set_file_containing_symbol("placer.v1.Placer");
  ASSERT_TRUE(stream->Write(describe));
  ServerReflectionResponse described;
  ASSERT_TRUE(stream->Read(&described));
  ASSERT_GT(described.file_descriptor_response().file_descriptor_proto_size(), 0);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(described.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "placer.v1");
  std::set<std::string> methods;
  for (const auto& service : file.service()) {
    for (const auto& method : service.method()) methods.insert(method.name());
  }
  EXPECT_EQ(methods, (std::set<std::string>{"Generate", "Forward", "Tokenize", "GetModelInfo"}));

  // grpcurl finds the Open Inference Protocol the same way.
  ServerReflectionRequest describe_oip;
  describe_oip.set_file_containing_symbol("inference.GRPCInferenceService");
  ASSERT_TRUE(stream->Write(describe_oip));
  ServerReflectionResponse described_oip;
  ASSERT_TRUE(stream->Read(&described_oip));
  // The file may come with others (the reflection service sends what it has not sent yet).
  bool found = false;
  for (const std::string& bytes : described_oip.file_descriptor_response().file_descriptor_proto()) {
    ASSERT_TRUE(file.ParseFromString(bytes));
    if (file.package() == "inference") {
      found = true;
      break;
    }
  }
  ASSERT_TRUE(found) << described_oip.DebugString();
  methods.clear();
  for (const auto& service : file.service()) {
    for (const auto& method : service.method()) methods.insert(method.name());
  }
  EXPECT_EQ(methods, (std::set<std::string>{"ServerLive", "ServerReady", "ModelReady",
                                            "ServerMetadata", "ModelMetadata", "ModelInfer",
                                            "ModelStreamInfer"}));

  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace placer::testing
