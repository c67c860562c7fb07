// Incremental decoding never yields half a UTF-8 character and adds up to the whole decode;
// stop strings are found across token boundaries and never emitted.
#include <gtest/gtest.h>

#include "model/tokenizer/stop_string_matcher.h"
#include "model/tokenizer/stream_decoder.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode_text.h"
#include "tests/tokenizer/sample_tokenizers.h"

namespace placer::tokenizer {
namespace {

using testing::SentencePieceLayout;

std::vector<std::shared_ptr<const Tokenizer>> AllSamples() {
  std::vector<std::shared_ptr<const Tokenizer>> out;
  for (const std::string arch : {"llama", "gpt2"}) {
    auto t = Tokenizer::FromJson(testing::MakeCheckpointTokenizerJson(arch, 400),
                                 testing::MakeCheckpointTokenizerConfig(arch, 400));
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) out.push_back(*t);
  }
  for (const auto layout : {SentencePieceLayout::kNormalizer, SentencePieceLayout::kMetaspace}) {
    auto t = Tokenizer::FromJson(testing::SentencePieceStyleTokenizerJson(layout),
                                 testing::SentencePieceStyleTokenizerConfig());
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) out.push_back(*t);
  }
  return out;
}

const std::vector<std::string>& Texts() {
  static const auto* texts = new std::vector<std::string>{
      "Hello world", " leading and trailing ", "日本語のテキスト", "😀👍🏽👨‍👩‍👧‍👦🇺🇸",
      "naïve café straße", "mixed 😀 text 日本 and ascii", "\t\n\r\n  ", "x"};
  return *texts;
}

TEST(StreamDecoder, NeverEmitsHalfACharacterAndAddsUpToDecode) {
  for (const auto& tokenizer : AllSamples()) {
    for (const std::string& text : Texts()) {
      auto ids = tokenizer->Encode(text, true);
      ASSERT_TRUE(ids.ok()) << ids.status();
      for (const bool skip_special : {false, true}) {
        StreamDecoder stream(*tokenizer, /*continues_text=*/false, skip_special);
        std::string streamed;
        for (const int32_t id : *ids) {
          const std::string delta = stream.Add(id);
          EXPECT_TRUE(IsValidUtf8(delta)) << text;
          streamed += delta;
        }
        streamed += stream.Finish();
        EXPECT_EQ(streamed, tokenizer->Decode(*ids, skip_special)) << text;
      }
    }
  }
}

TEST(StreamDecoder, HoldsTheBytesOfASplitCharacter) {
  auto tokenizer = Tokenizer::FromJson(testing::MakeCheckpointTokenizerJson("gpt2", 300),
                                       testing::MakeCheckpointTokenizerConfig("gpt2", 300));
  ASSERT_TRUE(tokenizer.ok());
  auto ids = (*tokenizer)->Encode("😀", false);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 4u) << "a small vocabulary spells the emoji byte by byte";
  StreamDecoder stream(**tokenizer, true, true);
  EXPECT_EQ(stream.Add((*ids)[0]), "");
  EXPECT_EQ(stream.Add((*ids)[1]), "");
  EXPECT_EQ(stream.Add((*ids)[2]), "");
  EXPECT_EQ(stream.Add((*ids)[3]), "😀");
  EXPECT_EQ(stream.Finish(), "");
}

TEST(StreamDecoder, AnUnfinishedCharacterEndsAsReplacementCharacter) {
  auto tokenizer = Tokenizer::FromJson(testing::MakeCheckpointTokenizerJson("gpt2", 300),
                                       testing::MakeCheckpointTokenizerConfig("gpt2", 300));
  ASSERT_TRUE(tokenizer.ok());
  auto ids = (*tokenizer)->Encode("😀", false);
  ASSERT_TRUE(ids.ok());
  StreamDecoder stream(**tokenizer, true, true);
  EXPECT_EQ(stream.Add((*ids)[0]), "");
  EXPECT_EQ(stream.Add((*ids)[1]), "");
  EXPECT_EQ(stream.Finish(), "\xEF\xBF\xBD");
  EXPECT_EQ((*tokenizer)->Decode({(*ids)[0], (*ids)[1]}), "\xEF\xBF\xBD");
}

TEST(StreamDecoder, ByteFallbackTokensAreHeldToo) {
  auto tokenizer =
      Tokenizer::FromJson(testing::SentencePieceStyleTokenizerJson(SentencePieceLayout::kNormalizer),
                          testing::SentencePieceStyleTokenizerConfig());
  ASSERT_TRUE(tokenizer.ok());
  auto ids = (*tokenizer)->Encode("a日", false);  // ▁a <0xE6> <0x97> <0xA5>
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 4u);
  StreamDecoder stream(**tokenizer, /*continues_text=*/true, true);
  EXPECT_EQ(stream.Add((*ids)[0]), " a");  // a continuation keeps its space
  EXPECT_EQ(stream.Add((*ids)[1]), "");
  EXPECT_EQ(stream.Add((*ids)[2]), "");
  EXPECT_EQ(stream.Add((*ids)[3]), "日");
}

TEST(StopStringMatcher, FindsAStopStringSplitAcrossChunks) {
  StopStringMatcher matcher({"world", "\n\n"});
  auto a = matcher.Add("hel");
  EXPECT_EQ(a.text, "hel");
  EXPECT_FALSE(a.stopped);
  auto b = matcher.Add("lo wo");
  EXPECT_EQ(b.text, "lo ");  // "wo" might start "world"
  EXPECT_FALSE(b.stopped);
  auto c = matcher.Add("rld and more");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(matcher.Add("after").stopped);
  EXPECT_EQ(matcher.Finish(), "");
}

TEST(StopStringMatcher, ReleasesHeldTextThatTurnsOutNotToStop) {
  StopStringMatcher matcher({"world"});
  EXPECT_EQ(matcher.Add("a wor").text, "a ");
  EXPECT_EQ(matcher.Add("m").text, "worm");
  EXPECT_EQ(matcher.Add("w").text, "");
  EXPECT_EQ(matcher.Finish(), "w");
}

TEST(StopStringMatcher, TheEarliestMatchWinsAndTextBeforeItIsKept) {
  StopStringMatcher matcher({"cd", "b"});
  auto result = matcher.Add("abcd");
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.text, "a");
  StopStringMatcher multibyte({"日本"});
  EXPECT_EQ(multibyte.Add("x日").text, "x");
  auto stopped = multibyte.Add("本y");
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.text, "");
}

// Stop strings over real token streams: every way the stop string falls across tokens.
TEST(StopStringMatcher, OverTokenStreamsTheStopTextIsNeverReturned) {
  for (const auto& tokenizer : AllSamples()) {
    const std::string text = "The fisherman went out to the sea, and the fish spoke.";
    auto ids = tokenizer->Encode(text, false);
    ASSERT_TRUE(ids.ok());
    const std::string decoded = tokenizer->Decode(*ids);
    for (const std::string stop : {"fish", "sea, and", "spoke.", "e", "not there"}) {
      StreamDecoder stream(*tokenizer, false, true);
      StopStringMatcher matcher({stop});
      std::string out;
      bool stopped = false;
      for (const int32_t id : *ids) {
        auto result = matcher.Add(stream.Add(id));
        out += result.text;
        if (result.stopped) {
          stopped = true;
          break;
        }
      }
      if (!stopped) out += matcher.Add(stream.Finish()).text + matcher.Finish();
      const size_t at = decoded.find(stop);
      EXPECT_EQ(stopped, at != std::string::npos) << stop;
      EXPECT_EQ(out, decoded.substr(0, at)) << stop;
    }
  }
}

}  // namespace
}  // namespace placer::tokenizer
