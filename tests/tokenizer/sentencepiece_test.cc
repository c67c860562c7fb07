// SentencePiece-style BPE (Llama 2, Mistral): "▁" for spaces, byte_fallback to <0xNN> tokens,
// Prepend/Replace normalizers or a Metaspace pre-tokenizer, and the decoders that undo them.
#include <gtest/gtest.h>

#include "model/tokenizer/tokenizer.h"
#include "tests/tokenizer/sample_tokenizers.h"

namespace placer::tokenizer {
namespace {

using testing::SentencePieceLayout;

class SentencePieceStyle : public ::testing::TestWithParam<SentencePieceLayout> {
 protected:
  void SetUp() override {
    auto loaded = Tokenizer::FromJson(testing::SentencePieceStyleTokenizerJson(GetParam()),
                                      testing::SentencePieceStyleTokenizerConfig());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = *loaded;
  }
  int32_t Id(const std::string& token) const {
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      if (tokenizer_->TokenText(id) == token) return id;
    }
    ADD_FAILURE() << "no token " << token;
    return -1;
  }
  std::shared_ptr<const Tokenizer> tokenizer_;
};

TEST_P(SentencePieceStyle, SpacesBecomeTheMetaSymbolAndMerge) {
  auto ids = tokenizer_->Encode("hello world and the", true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, Id("▁hello"), Id("▁world"), Id("▁and"), Id("▁the")}));
  EXPECT_EQ(tokenizer_->Decode(*ids, true), "hello world and the");
  EXPECT_EQ(tokenizer_->Decode(*ids, false), "<s> hello world and the");
}

TEST_P(SentencePieceStyle, CharactersOutsideTheVocabularyFallBackToBytes) {
  auto ids = tokenizer_->Encode("日", false);  // E6 97 A5
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{Id("▁"), Id("<0xE6>"), Id("<0x97>"), Id("<0xA5>")}));
  EXPECT_EQ(tokenizer_->Decode(*ids), "日");
  auto accented = tokenizer_->Encode("é", false);
  ASSERT_TRUE(accented.ok());
  EXPECT_EQ(*accented, (std::vector<int32_t>{Id("▁"), Id("é")}));
}

TEST_P(SentencePieceStyle, UnicodeTextRoundTrips) {
  for (const std::string text :
       {"hello", "trailing space ", "two  spaces", "Ünïcödé and 日本語",
        "emoji 😀👍🏽👨‍👩‍👧 done", "tabs\tand\nnewlines\r\n", "ελληνικά, русский, עברית, العربية",
        "mixed 123 and 4.5e-6!", "e\u0301 combining", ""}) {
    auto ids = tokenizer_->Encode(text, true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(tokenizer_->Decode(*ids, /*skip_special_tokens=*/true), text) << text;
  }
}

// Prepend + Replace keeps a leading space (two "▁", the decoder strips one); Metaspace with
// prepend_scheme "first" adds none to text that starts with a space, and its decoder drops
// the "▁" of the first token, so one leading space is lost, exactly as in Hugging Face.
TEST_P(SentencePieceStyle, LeadingSpaceFollowsTheLayout) {
  auto ids = tokenizer_->Encode(" hello", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(tokenizer_->Decode(*ids),
            GetParam() == SentencePieceLayout::kNormalizer ? " hello" : "hello");
}

TEST_P(SentencePieceStyle, SpecialTokensInTheTextAreRecognised) {
  auto ids = tokenizer_->Encode("hello</s>", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->back(), 2);
  EXPECT_EQ(ids->front(), Id("▁hello"));
}

INSTANTIATE_TEST_SUITE_P(Layouts, SentencePieceStyle,
                         ::testing::Values(SentencePieceLayout::kNormalizer,
                                           SentencePieceLayout::kMetaspace),
                         [](const ::testing::TestParamInfo<SentencePieceLayout>& info) {
                           return info.param == SentencePieceLayout::kNormalizer
                                      ? std::string("PrependReplaceNormalizers")
                                      : std::string("MetaspacePreTokenizer");
                         });

TEST(SentencePieceUnk, WithoutByteFallbackUnknownCharactersFuseIntoOneUnk) {
  nlohmann::json json = testing::SentencePieceStyleTokenizerJson(SentencePieceLayout::kNormalizer);
  json["model"]["byte_fallback"] = false;
  auto tokenizer = Tokenizer::FromJson(json, nullptr);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ids = (*tokenizer)->Encode("a日本b", false);
  ASSERT_TRUE(ids.ok());
  // "▁a", one <unk> for both characters, "b".
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_EQ((*ids)[1], 0);
}

}  // namespace
}  // namespace placer::tokenizer
