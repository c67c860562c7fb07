#include "proto/wire/request_wire.h"

#include <cstdint>
#include <map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

namespace placer::wire {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// Deeper nesting than any placer request has; protobuf's own parser stops at 100.
constexpr int kMaxDepth = 64;

bool InRange(std::uint8_t byte, std::uint8_t low, std::uint8_t high) {
  return byte >= low && byte <= high;
}

// Length of the well-formed sequence at text[at], or 0 (RFC 3629, table 3-7 of Unicode).
std::size_t SequenceLength(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[at + i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint8_t second_low = 0x80;
  std::uint8_t second_high = 0xBF;
  if (InRange(lead, 0xC2, 0xDF)) {
    length = 2;
  } else if (InRange(lead, 0xE0, 0xEF)) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;   // overlong
    if (lead == 0xED) second_high = 0x9F;  // surrogates
  } else if (InRange(lead, 0xF0, 0xF4)) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;   // overlong
    if (lead == 0xF4) second_high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - at < length || !InRange(byte(1), second_low, second_high)) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (!InRange(byte(i), 0x80, 0xBF)) return 0;
  }
  return length;
}

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
      if (const std::optional<std::size_t> at = FirstInvalidUtf8(body)) {
        return name + ": invalid UTF-8 at byte " + std::to_string(*at) +
               " (text must be well-formed UTF-8)";
      }
    } else if (auto found = Walk(body, *field->message_type(), name + ".", depth + 1)) {
      return found;
    }
    if (!in.Skip(static_cast<int>(length))) return std::nullopt;
  }
}

}  // namespace

std::optional<std::size_t> FirstInvalidUtf8(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t length = SequenceLength(text, at);
    if (length == 0) return at;
    at += length;
  }
  return std::nullopt;
}

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
