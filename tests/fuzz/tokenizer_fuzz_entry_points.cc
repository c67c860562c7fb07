#include "tests/fuzz/tokenizer_fuzz_entry_points.h"

#include <memory>

#include "model/tokenizer/stream_decoder.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode_text.h"
#include "tests/tokenizer/sample_tokenizers.h"

namespace placer::fuzz {
namespace {

using tokenizer::Tokenizer;

constexpr char kProbe[] =
    "Hello world, it's 2024! naïve café 日本語 😀👍🏽 \t\n  <s> </s> <|endoftext|> 12345";

void Check(bool invariant) {
  if (!invariant) __builtin_trap();
}

// What every loaded tokenizer must do with any text.
void CheckEncodeDecode(const Tokenizer& t, const std::string& text, bool expect_round_trip) {
  auto ids = t.Encode(text, /*add_special_tokens=*/true);
  if (!placer::IsValidUtf8(text)) {
    Check(!ids.ok() && ids.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  if (!ids.ok()) {
    // Only a pathological regex may give up, and it says so.
    Check(ids.status().code() == absl::StatusCode::kResourceExhausted);
    return;
  }
  for (const std::int32_t id : *ids) Check(id >= 0 && id < t.vocab_size() && t.TokenText(id));
  const std::string decoded = t.Decode(*ids);
  Check(placer::IsValidUtf8(decoded));
  tokenizer::StreamDecoder stream(t, /*continues_text=*/false, /*skip_special_tokens=*/false);
  std::string streamed;
  for (const std::int32_t id : *ids) {
    const std::string delta = stream.Add(id);
    Check(placer::IsValidUtf8(delta));
    streamed += delta;
  }
  streamed += stream.Finish();
  Check(streamed == decoded);
  if (expect_round_trip) {
    auto plain = t.Encode(text, false);
    Check(plain.ok() && t.Decode(*plain) == text);
  }
}

std::vector<std::shared_ptr<const Tokenizer>> BuiltIn() {
  std::vector<std::shared_ptr<const Tokenizer>> out;
  auto add = [&](const nlohmann::json& json, const nlohmann::json& config) {
    auto t = Tokenizer::FromJson(json, config);
    Check(t.ok());
    out.push_back(*t);
  };
  add(testing::MakeCheckpointTokenizerJson("llama", 320),
      testing::MakeCheckpointTokenizerConfig("llama", 320));
  add(testing::SentencePieceStyleTokenizerJson(testing::SentencePieceLayout::kNormalizer),
      testing::SentencePieceStyleTokenizerConfig());
  add(testing::SentencePieceStyleTokenizerJson(testing::SentencePieceLayout::kMetaspace),
      testing::SentencePieceStyleTokenizerConfig());
  return out;
}

}  // namespace

int FuzzTokenizerJson(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string json = input.substr(0, nul);
  const std::string text = nul == std::string::npos ? kProbe : input.substr(nul + 1);
  auto t = Tokenizer::FromJsonText(json, "");
  if (!t.ok()) {
    Check(!t.status().message().empty());
    return 0;
  }
  CheckEncodeDecode(**t, text, false);
  return 0;
}

int FuzzTokenizerText(const std::uint8_t* data, std::size_t size) {
  static const auto* tokenizers = new std::vector<std::shared_ptr<const Tokenizer>>(BuiltIn());
  if (size == 0) return 0;
  const std::size_t which = data[0] % tokenizers->size();
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  // Byte-level BPE spells every byte, so any text comes back exactly.
  CheckEncodeDecode(*(*tokenizers)[which], text, /*expect_round_trip=*/which == 0);
  return 0;
}

std::vector<std::string> TokenizerJsonSeeds() {
  std::vector<std::string> seeds;
  seeds.push_back(testing::MakeCheckpointTokenizerJson("llama", 300).dump());
  seeds.push_back(testing::MakeCheckpointTokenizerJson("gpt2", 280).dump() +
                  std::string(1, '\0') + "gpt2 text 😀");
  seeds.push_back(
      testing::SentencePieceStyleTokenizerJson(testing::SentencePieceLayout::kNormalizer).dump());
  nlohmann::json variant =
      testing::SentencePieceStyleTokenizerJson(testing::SentencePieceLayout::kMetaspace);
  seeds.push_back(variant.dump());
  // The remaining normalizer and pre-tokenizer kinds, so mutations start from them too.
  variant["normalizer"] = {{"type", "Sequence"},
                           {"normalizers",
                            {{{"type", "NFKC"}}, {{"type", "Lowercase"}}, {{"type", "Strip"}},
                             {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}},
                              {"content", " "}}}}};
  variant["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "(?i:'s|'t)|\\p{N}{1,3}| ?\\p{L}+|\\s+(?!\\S)"}}},
         {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}}}};
  seeds.push_back(variant.dump());
  return seeds;
}

std::vector<std::string> TokenizerTextSeeds() {
  std::vector<std::string> seeds;
  for (const char which : {'\0', '\1', '\2'}) {
    for (const std::string& text :
         {std::string(kProbe), std::string("plain ascii"), std::string("\xF0\x9F\x98"),
          std::string("  \n\n\t "), std::string("<s>hello</s>")}) {
      seeds.push_back(std::string(1, which) + text);
    }
  }
  return seeds;
}

}  // namespace placer::fuzz
