// The request_wire libFuzzer target's entry point, also run by tests/proto/request_wire_test.cc
// without libFuzzer. Feeds untrusted bytes to placer::wire (proto/wire/request_wire.h) as a
// GenerateRequest and traps when it disagrees with protobuf's own parser: it must accept
// exactly what protobuf accepts, and whatever it names as invalid UTF-8 protobuf must refuse.
#pragma once

#include <cstddef>
#include <cstdint>

namespace placer::fuzz {

int FuzzRequestWire(const std::uint8_t* data, std::size_t size);

}  // namespace placer::fuzz
