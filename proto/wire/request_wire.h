// Parsing request messages from the wire so that bad bytes get an answer naming the field.
// protobuf refuses a proto3 `string` field holding invalid UTF-8 by failing the whole parse,
// which gRPC turns into a bare INTERNAL before any handler runs. ParseRequestWire looks for
// that first (walking the wire bytes with the message's descriptor) and says which field and
// byte; anything else it cannot parse is reported as malformed. Pure protobuf, no gRPC, so the
// fuzz target can link it alone.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace placer::wire {

// The first `string` field, nested messages included, whose bytes in `wire` are not UTF-8 (as
// base/utf8.h checks it), as
// "params.stop[1]: invalid UTF-8 at byte 17 (text must be well-formed UTF-8)"; nullopt when
// there is none or the bytes stop being a well-formed message first.
std::optional<std::string> FindInvalidUtf8Field(std::string_view wire,
                                                const google::protobuf::Descriptor& descriptor);

// `wire` into `message`; on failure the reason, naming the field when it is a text field.
std::optional<std::string> ParseRequestWire(std::string_view wire,
                                            google::protobuf::Message* message);

}  // namespace placer::wire
