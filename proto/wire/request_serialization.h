// gRPC reads placer's request messages with ParseRequestWire (request_wire.h): a text field
// with invalid UTF-8, or bytes that are no message at all, is INVALID_ARGUMENT saying so,
// where gRPC's own protobuf parse answers a bare INTERNAL before the handler runs.
// placer.grpc.pb.h includes this file (grpc_cpp_plugin's additional_header_includes, see
// proto/CMakeLists.txt), so that every method handler and stub sees these specializations:
// an explicit specialization must be visible wherever the template would be instantiated.
#pragma once

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "placer/v1/placer.pb.h"

namespace placer::wire {

// Takes the bytes out of `buffer` (it is cleared, as gRPC's own deserializer does).
grpc::Status DeserializeRequest(grpc::ByteBuffer* buffer, google::protobuf::Message* message);

template <class Request>
struct RequestSerializationTraits {
  static grpc::Status Serialize(const google::protobuf::MessageLite& message,
                                grpc::ByteBuffer* buffer, bool* own_buffer) {
    return grpc::GenericSerialize<grpc::ProtoBufferWriter, Request>(message, buffer,
                                                                     own_buffer);
  }
  static grpc::Status Deserialize(grpc::ByteBuffer* buffer, Request* message) {
    return DeserializeRequest(buffer, message);
  }
};

}  // namespace placer::wire

namespace grpc {

template <>
class SerializationTraits<placer::v1::GenerateRequest>
    : public placer::wire::RequestSerializationTraits<placer::v1::GenerateRequest> {};
template <>
class SerializationTraits<placer::v1::ForwardRequest>
    : public placer::wire::RequestSerializationTraits<placer::v1::ForwardRequest> {};
template <>
class SerializationTraits<placer::v1::TokenizeRequest>
    : public placer::wire::RequestSerializationTraits<placer::v1::TokenizeRequest> {};
template <>
class SerializationTraits<placer::v1::GetModelInfoRequest>
    : public placer::wire::RequestSerializationTraits<placer::v1::GetModelInfoRequest> {};

}  // namespace grpc
