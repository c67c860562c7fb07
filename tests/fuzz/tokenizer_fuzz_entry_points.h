// The tokenizer's libFuzzer entry points, also run by the ctest regression test
// (tests/tokenizer/tokenizer_fuzz_regression_test.cc) without libFuzzer. They trap when a
// tokenizer breaks an invariant the server relies on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace placer::fuzz {

// Input: tokenizer.json text, optionally followed by a NUL byte and a text to encode (else
// a fixed multilingual probe is encoded).
int FuzzTokenizerJson(const std::uint8_t* data, std::size_t size);
// Input: one byte choosing a built-in tokenizer (byte-level or SentencePiece-style), then the
// text to encode.
int FuzzTokenizerText(const std::uint8_t* data, std::size_t size);

// Seed inputs for the two targets.
std::vector<std::string> TokenizerJsonSeeds();
std::vector<std::string> TokenizerTextSeeds();

}  // namespace placer::fuzz
