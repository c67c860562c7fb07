// The Open Inference Protocol's requests read with ParseRequestWire, as placer's own are
// (request_serialization.h): a name, datatype or string parameter with invalid UTF-8 is
// INVALID_ARGUMENT naming the field instead of gRPC's bare INTERNAL. grpc_service.grpc.pb.h
// includes this file (see proto/CMakeLists.txt) so every handler sees the specializations.
#pragma once

#include "inference/grpc_service.pb.h"
#include "proto/wire/request_serialization.h"

namespace grpc {

template <>
class SerializationTraits<inference::ServerLiveRequest>
    : public placer::wire::RequestSerializationTraits<inference::ServerLiveRequest> {};
template <>
class SerializationTraits<inference::ServerReadyRequest>
    : public placer::wire::RequestSerializationTraits<inference::ServerReadyRequest> {};
template <>
class SerializationTraits<inference::ModelReadyRequest>
    : public placer::wire::RequestSerializationTraits<inference::ModelReadyRequest> {};
template <>
class SerializationTraits<inference::ServerMetadataRequest>
    : public placer::wire::RequestSerializationTraits<inference::ServerMetadataRequest> {};
template <>
class SerializationTraits<inference::ModelMetadataRequest>
    : public placer::wire::RequestSerializationTraits<inference::ModelMetadataRequest> {};
template <>
class SerializationTraits<inference::ModelInferRequest>
    : public placer::wire::RequestSerializationTraits<inference::ModelInferRequest> {};

}  // namespace grpc
