#include "tests/fuzz/request_wire_fuzz_entry_point.h"

#include <google/protobuf/stubs/common.h>
#include <google/protobuf/stubs/logging.h>

#include <string_view>

#include "placer/v1/placer.pb.h"
#include "base/utf8.h"
#include "proto/wire/request_wire.h"

namespace placer::fuzz {

int FuzzRequestWire(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The validator against protobuf's, on the raw input as one text.
  const bool valid_utf8 = !placer::FirstInvalidUtf8(absl::string_view(bytes.data(), bytes.size())).has_value();
  if (valid_utf8 != google::protobuf::internal::IsStructurallyValidUTF8(
                        bytes.data(), static_cast<int>(bytes.size()))) {
    __builtin_trap();
  }
  // The request parse against protobuf's (silenced: it logs every UTF-8 refusal).
  google::protobuf::LogSilencer quiet;
  v1::GenerateRequest ours;
  const std::optional<std::string> error = wire::ParseRequestWire(bytes, &ours);
  v1::GenerateRequest theirs;
  const bool protobuf_ok = theirs.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  if (error.has_value() == protobuf_ok) __builtin_trap();
  if (!error && ours.SerializeAsString() != theirs.SerializeAsString()) __builtin_trap();
  if (error && error->find("invalid UTF-8") != std::string::npos &&
      wire::FindInvalidUtf8Field(bytes, *v1::GenerateRequest::descriptor()) != error) {
    __builtin_trap();
  }
  return 0;
}

}  // namespace placer::fuzz
