// The functions the libFuzzer targets call, also run by the ctest
// regression test (tests/loader/fuzz_regression_test.cc) without libFuzzer.
// Each parses untrusted bytes and traps if a successful parse breaks the
// invariants the rest of placer relies on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace placer::fuzz {

int FuzzSafetensorsHeader(const std::uint8_t* data, std::size_t size);
int FuzzShardIndex(const std::uint8_t* data, std::size_t size);
int FuzzModelConfig(const std::uint8_t* data, std::size_t size);
int FuzzQuantizeConfig(const std::uint8_t* data, std::size_t size);

}  // namespace placer::fuzz
