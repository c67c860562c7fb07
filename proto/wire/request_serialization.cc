#include "proto/wire/request_serialization.h"

#include <string>
#include <vector>

#include "proto/wire/request_wire.h"

namespace placer::wire {

grpc::Status DeserializeRequest(grpc::ByteBuffer* buffer, google::protobuf::Message* message) {
  if (buffer == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "No payload");
  std::vector<grpc::Slice> slices;
  const grpc::Status dumped = buffer->Dump(&slices);
  buffer->Clear();
  if (!dumped.ok()) return dumped;
  // Requests are bounded by --max-request-bytes; one contiguous copy keeps the walk simple.
  std::string wire;
  for (const grpc::Slice& slice : slices) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (std::optional<std::string> error = ParseRequestWire(wire, message)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, *error);
  }
  return grpc::Status::OK;
}

}  // namespace placer::wire
