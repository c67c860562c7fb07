// Bad tokenizer.json / tokenizer_config.json: a clear error naming the file, the JSON path
// and the reason, never a crash.
#include <gtest/gtest.h>

#include "model/tokenizer/tokenizer.h"
#include "tests/tokenizer/sample_tokenizers.h"

namespace placer::tokenizer {
namespace {

nlohmann::json Good() {
  return testing::SentencePieceStyleTokenizerJson(testing::SentencePieceLayout::kNormalizer);
}

void ExpectError(const nlohmann::json& json, const nlohmann::json& config,
                 const std::string& expected) {
  auto tokenizer = Tokenizer::FromJson(json, config);
  ASSERT_FALSE(tokenizer.ok()) << "expected an error mentioning " << expected;
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find(expected), std::string::npos)
      << tokenizer.status().message();
}

TEST(TokenizerErrors, NameThePathAndTheReason) {
  nlohmann::json unigram = Good();
  unigram["model"]["type"] = "Unigram";
  ExpectError(unigram, nullptr, "tokenizer.json: model.type: model 'Unigram' is not supported");

  nlohmann::json bad_merge = Good();
  bad_merge["model"]["merges"][3] = "nope";
  ExpectError(bad_merge, nullptr, "model.merges[3]");

  nlohmann::json unknown_merge = Good();
  unknown_merge["model"]["merges"].push_back("x \xE2\x82\xAC");
  ExpectError(unknown_merge, nullptr, "is not in the vocabulary");

  nlohmann::json bad_id = Good();
  bad_id["model"]["vocab"]["a"] = -4;
  ExpectError(bad_id, nullptr, "model.vocab.a");

  nlohmann::json bad_normalizer = Good();
  bad_normalizer["normalizer"]["normalizers"][1]["type"] = "Precompiled";
  ExpectError(bad_normalizer, nullptr, "normalizer.normalizers[1].type");

  nlohmann::json bad_regex = Good();
  bad_regex["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                {"behavior", "Isolated"}};
  ExpectError(bad_regex, nullptr, "pre_tokenizer.pattern: cannot compile regex");

  nlohmann::json bad_behavior = bad_regex;
  bad_behavior["pre_tokenizer"]["pattern"] = {{"Regex", "\\s+"}};
  bad_behavior["pre_tokenizer"]["behavior"] = "Sideways";
  ExpectError(bad_behavior, nullptr, "pre_tokenizer.behavior");

  nlohmann::json bad_added = Good();
  bad_added["added_tokens"][1]["content"] = "";
  ExpectError(bad_added, nullptr, "added_tokens[1].content");

  nlohmann::json bad_decoder = Good();
  bad_decoder["decoder"] = {{"type", "WordPiece"}};
  ExpectError(bad_decoder, nullptr, "decoder.type");

  nlohmann::json no_model = Good();
  no_model.erase("model");
  ExpectError(no_model, nullptr, "model: missing");

  ExpectError(Good(), {{"bos_token", "<nope>"}, {"add_bos_token", true}},
              "tokenizer_config.json: bos_token: '<nope>' is not a token");
  ExpectError(Good(), {{"add_bos_token", "yes"}}, "tokenizer_config.json: add_bos_token");
  ExpectError(nlohmann::json::array(), nullptr, "tokenizer.json: expected a JSON object");
}

TEST(TokenizerErrors, TextThatIsNotJsonIsRefused) {
  auto tokenizer = Tokenizer::FromJsonText("{not json", "");
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.status().message().find("tokenizer.json: not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace placer::tokenizer
