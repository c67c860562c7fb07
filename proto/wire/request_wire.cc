#include "proto/wire/request_wire.h"

#include <cstdint>
#include <map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "base/utf8.h"

namespace placer::wire {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// Deeper nesting than any placer request has; protobuf's own parser stops at 100.
constexpr int kMaxDepth = 64;

std::optional<std::string> Walk(std::string_view wire, const Descriptor& descriptor,
                                const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  std::map<int, int> occurrences;  // field number -> times seen, for repeated fields' indices
  while (true) {
    const std::uint32_t tag = in.ReadTag();
    if (tag == 0) return std::nullopt;  // the end, or not a message: the parser will say
    const FieldDescriptor* field =
        descriptor.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool text_or_message =
        field != nullptr && (field->type() == FieldDescriptor::TYPE_STRING ||
                             field->type() == FieldDescriptor::TYPE_MESSAGE);
    if (!text_or_message ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return std::nullopt;
      continue;
    }
    std::uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return std::nullopt;
    const auto offset = static_cast<std::size_t>(in.CurrentPosition());
    if (length > wire.size() - offset) return std::nullopt;
    const std::string_view body = wire.substr(offset, length);
    std::string name = prefix + field->name();
    if (field->is_repeated()) {
      name += "[" + std::to_string(occurrences[field->number()]++) + "]";
    }
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      const absl::string_view text(body.data(), body.size());
      if (absl::Status valid = CheckUtf8(text, name); !valid.ok()) {
        return std::string(valid.message());
      }
    } else if (auto found = Walk(body, *field->message_type(), name + ".", depth + 1)) {
      return found;
    }
    if (!in.Skip(static_cast<int>(length))) return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> FindInvalidUtf8Field(std::string_view wire,
                                                const Descriptor& descriptor) {
  if (wire.size() > static_cast<std::size_t>(INT32_MAX)) return std::nullopt;
  return Walk(wire, descriptor, "", 0);
}

std::optional<std::string> ParseRequestWire(std::string_view wire,
                                            google::protobuf::Message* message) {
  // Before protobuf's parse, which would also log the UTF-8 failure to stderr on its own.
  if (auto invalid = FindInvalidUtf8Field(wire, *message->GetDescriptor())) return invalid;
  if (wire.size() <= static_cast<std::size_t>(INT32_MAX) &&
      message->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return std::nullopt;
  }
  message->Clear();
  return "the request is not a well-formed " + message->GetDescriptor()->full_name() +
         " message (protobuf wire format)";
}

}  // namespace placer::wire
