// Byte-level BPE on the tokenizer placer-make-checkpoint writes (what `make serve` uses), and
// the pieces byte-level BPE is made of: the split pattern and the byte alphabet.
#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "model/tokenizer/byte_level_alphabet.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode_regex.h"
#include "tests/tokenizer/sample_tokenizers.h"

namespace placer::tokenizer {
namespace {

using testing::MakeCheckpointTokenizerConfig;
using testing::MakeCheckpointTokenizerJson;

std::shared_ptr<const Tokenizer> Load(const std::string& arch) {
  auto tokenizer = Tokenizer::FromJson(MakeCheckpointTokenizerJson(arch, 512),
                                       MakeCheckpointTokenizerConfig(arch, 512));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *tokenizer : nullptr;
}

std::vector<std::string> Split(absl::string_view text) {
  auto regex = UnicodeRegex::Compile(kGpt2SplitPattern, "test");
  EXPECT_TRUE(regex.ok()) << regex.status();
  auto matches = (*regex)->FindAll(text);
  EXPECT_TRUE(matches.ok()) << matches.status();
  std::vector<std::string> pieces;
  for (const auto& [begin, end] : *matches) pieces.emplace_back(text.substr(begin, end - begin));
  return pieces;
}

TEST(ByteLevelAlphabet, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string spelled = ToByteLevelAlphabet(all);
  EXPECT_EQ(ToByteLevelAlphabet(" "), "\xC4\xA0");   // Ġ
  EXPECT_EQ(ToByteLevelAlphabet("\n"), "\xC4\x8A");  // Ċ
  EXPECT_EQ(FromByteLevelAlphabet(spelled), all);
  EXPECT_FALSE(FromByteLevelAlphabet("\xE2\x96\x81").has_value());  // ▁ is not in it
}

TEST(Gpt2SplitPattern, SplitsLikeGpt2) {
  EXPECT_EQ(Split("Hello world's 123 foo!!  bar \n"),
            (std::vector<std::string>{"Hello", " world", "'s", " 123", " foo", "!!", " ", " bar",
                                      " \n"}));
  EXPECT_EQ(Split("I'll  go"), (std::vector<std::string>{"I", "'ll", " ", " go"}));
}

// Oniguruma's \s (which Hugging Face runs) is Unicode White_Space: U+0085 and U+000B count,
// U+FEFF does not. JavaScript's \s (gpt-3-encoder) differs on U+0085 and U+FEFF, which is
// why the agreement test leaves those two out.
TEST(Gpt2SplitPattern, WhiteSpaceIsTheUnicodeProperty) {
  EXPECT_EQ(Split("a\xC2\x85\xC2\x85" "b"),
            (std::vector<std::string>{"a", "\xC2\x85", "\xC2\x85", "b"}));
  EXPECT_EQ(Split("a\x0B\x0B" "b"), (std::vector<std::string>{"a", "\x0B", "\x0B", "b"}));
  EXPECT_EQ(Split("a\xEF\xBB\xBF" "b"), (std::vector<std::string>{"a", "\xEF\xBB\xBF", "b"}));
  EXPECT_EQ(OnigurumaToIcu(R"(\s+(?!\S)|\\s)"), R"(\p{White_Space}+(?!\P{White_Space})|\\s)");
}

TEST(MakeCheckpointTokenizer, LlamaAddsBosAndRoundTrips) {
  auto tokenizer = Load("llama");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 512);
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
  for (const std::string text : {"The quick brown fox", "  spaces\tand\nlines  ",
                                 "Ünïcödé 日本語 😀👍🏽 ∑", "", "<s> is special, </s> too"}) {
    auto ids = tokenizer->Encode(text, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_FALSE(ids->empty());
    EXPECT_EQ(ids->front(), 1) << text;
    EXPECT_EQ(tokenizer->Decode(*ids, /*skip_special_tokens=*/true),
              absl::StrReplaceAll(text, {{"<s>", ""}, {"</s>", ""}}));
    auto plain = tokenizer->Encode(text, false);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(tokenizer->Decode(*plain), text);
  }
}

TEST(MakeCheckpointTokenizer, MergesLearnedWordsAndFindsSpecialTokens) {
  auto tokenizer = Load("llama");
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->Encode(" the", false);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 1u) << "' the' is among the first merges of the training text";
  EXPECT_EQ(tokenizer->TokenText((*ids)[0]), "\xC4\xA0the");  // Ġthe
  auto special = tokenizer->Encode("a</s>b", false);
  ASSERT_TRUE(special.ok());
  EXPECT_EQ(*special, (std::vector<int32_t>{*tokenizer->Encode("a", false).value().begin(), 2,
                                            *tokenizer->Encode("b", false).value().begin()}));
  EXPECT_TRUE(tokenizer->IsSpecial(2));
  EXPECT_EQ(tokenizer->TokenText(2), "</s>");
  EXPECT_FALSE(tokenizer->TokenText(100000).has_value());
}

TEST(MakeCheckpointTokenizer, Gpt2AddsNothingByDefault) {
  auto tokenizer = Load("gpt2");
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->Encode("hello", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_NE(ids->front(), 0);
  EXPECT_EQ(tokenizer->eos_id(), 0);
}

TEST(Tokenizer, RefusesInvalidUtf8NamingTheByte) {
  auto tokenizer = Load("gpt2");
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->Encode("ok\xC3(", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("invalid UTF-8 at byte 2"), std::string::npos)
      << ids.status();
}

}  // namespace
}  // namespace placer::tokenizer
