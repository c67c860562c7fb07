#include "loader/tools/bpe_tokenizer_builder.h"

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placer::loader {
namespace {

// Training text for the merges: plain English, so common words and
// word pieces (" the", "ing", " of") become single tokens.
constexpr char kTrainingText[] =
    "The quick brown fox jumps over the lazy dog. Once upon a time, in a small "
    "village near the sea, there lived an old fisherman and his wife. Every "
    "morning he went out to the water with his boat and his nets, and every "
    "evening he came home with the fish he had caught. The people of the "
    "village liked him, because he was kind and honest, and because he always "
    "shared what he had with those who had nothing. One day, when the wind was "
    "strong and the waves were high, he saw something shining in the water. It "
    "was a golden fish, and it spoke to him in a human voice. \"Let me go, "
    "good man,\" said the fish, \"and I will give you anything you wish for.\" "
    "The fisherman was surprised, but he was not greedy. He let the fish go "
    "and asked for nothing in return. When he told his wife the story, she was "
    "angry and sent him back to the sea to ask for a new house, then for a "
    "palace, and then for the power to rule the land and the sea. Each time "
    "the fish gave her what she wanted, and each time she wanted more. In the "
    "end the fish said nothing, and when the fisherman came home, he found his "
    "wife sitting in front of their old house, with their old broken tub, just "
    "as it had been before. Models learn language from many examples like this "
    "one: they read the text, count the patterns, and predict the next word. "
    "Numbers such as 1, 2, 3, 10, 42, 100 and 2024 appear in text too.";

// GPT-2's reversible map from bytes to printable unicode code points.
std::vector<std::string> ByteToUnicode() {
  std::vector<int> printable;
  for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
  std::vector<int> code_point(256, -1);
  for (int b : printable) code_point[static_cast<std::size_t>(b)] = b;
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    if (code_point[static_cast<std::size_t>(b)] < 0) {
      code_point[static_cast<std::size_t>(b)] = 256 + next++;
    }
  }
  std::vector<std::string> utf8(256);
  for (int b = 0; b < 256; ++b) {
    const int cp = code_point[static_cast<std::size_t>(b)];
    std::string& s = utf8[static_cast<std::size_t>(b)];
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return utf8;
}

enum class CharClass { kLetter, kDigit, kSpace, kOther };

CharClass Classify(unsigned char c) {
  if (std::isalpha(c)) return CharClass::kLetter;
  if (std::isdigit(c)) return CharClass::kDigit;
  if (std::isspace(c)) return CharClass::kSpace;
  return CharClass::kOther;
}

// A simplification of the GPT-2 split regex that agrees with it on ASCII
// text: an optional leading space followed by a run of one character class.
std::vector<std::string> PreTokenize(const std::string& text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    std::string word;
    if (text[i] == ' ' && i + 1 < text.size() && text[i + 1] != ' ') word.push_back(text[i++]);
    const CharClass cls = Classify(static_cast<unsigned char>(text[i]));
    while (i < text.size() && Classify(static_cast<unsigned char>(text[i])) == cls) {
      word.push_back(text[i++]);
    }
    words.push_back(std::move(word));
  }
  return words;
}

using Symbols = std::vector<std::string>;

// Learns up to max_merges merges, most frequent pair first; ties go to the
// lexicographically smallest pair so the result is the same on every run.
std::vector<std::pair<std::string, std::string>> LearnMerges(std::size_t max_merges) {
  const std::vector<std::string> byte_symbols = ByteToUnicode();
  std::map<Symbols, std::int64_t> word_counts;
  for (const std::string& word : PreTokenize(kTrainingText)) {
    Symbols symbols;
    for (const char c : word) symbols.push_back(byte_symbols[static_cast<unsigned char>(c)]);
    ++word_counts[symbols];
  }
  std::vector<std::pair<std::string, std::string>> merges;
  while (merges.size() < max_merges) {
    std::map<std::pair<std::string, std::string>, std::int64_t> pair_counts;
    for (const auto& [symbols, count] : word_counts) {
      for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
        pair_counts[{symbols[k], symbols[k + 1]}] += count;
      }
    }
    if (pair_counts.empty()) break;
    auto best = pair_counts.begin();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const auto pair = best->first;
    merges.push_back(pair);
    std::map<Symbols, std::int64_t> merged_counts;
    for (const auto& [symbols, count] : word_counts) {
      Symbols merged;
      for (std::size_t k = 0; k < symbols.size(); ++k) {
        if (k + 1 < symbols.size() && symbols[k] == pair.first && symbols[k + 1] == pair.second) {
          merged.push_back(pair.first + pair.second);
          ++k;
        } else {
          merged.push_back(symbols[k]);
        }
      }
      merged_counts[merged] += count;
    }
    word_counts = std::move(merged_counts);
  }
  return merges;
}

nlohmann::ordered_json AddedToken(std::int64_t id, const std::string& content) {
  nlohmann::ordered_json token;
  token["id"] = id;
  token["content"] = content;
  token["single_word"] = false;
  token["lstrip"] = false;
  token["rstrip"] = false;
  token["normalized"] = false;
  token["special"] = true;
  return token;
}

nlohmann::ordered_json ByteLevel(bool add_prefix_space, bool trim_offsets) {
  nlohmann::ordered_json step;
  step["type"] = "ByteLevel";
  step["add_prefix_space"] = add_prefix_space;
  step["trim_offsets"] = trim_offsets;
  step["use_regex"] = true;
  return step;
}

}  // namespace

absl::StatusOr<TokenizerFiles> BuildByteLevelBpeTokenizer(const TokenizerSpec& spec) {
  const std::int64_t fixed = static_cast<std::int64_t>(spec.special_tokens.size()) + 256;
  if (spec.vocab_size < fixed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab ", spec.vocab_size, " is too small for a byte-level BPE tokenizer: it needs ",
        fixed, " (256 byte tokens and ", spec.special_tokens.size(), " special tokens)"));
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  nlohmann::ordered_json added_tokens = nlohmann::ordered_json::array();
  std::int64_t next_id = 0;
  for (const std::string& special : spec.special_tokens) {
    added_tokens.push_back(AddedToken(next_id, special));
    vocab[special] = next_id++;
  }
  for (const std::string& symbol : ByteToUnicode()) vocab[symbol] = next_id++;
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (const auto& [left, right] : LearnMerges(static_cast<std::size_t>(spec.vocab_size - fixed))) {
    merges.push_back(left + " " + right);
    if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
  }
  // Like Llama 3's reserved tokens: fill the vocabulary to the model's size.
  for (std::int64_t reserved = 0; next_id < spec.vocab_size; ++reserved) {
    const std::string name = absl::StrCat("<|reserved_special_token_", reserved, "|>");
    added_tokens.push_back(AddedToken(next_id, name));
    vocab[name] = next_id++;
  }

  TokenizerFiles files;
  nlohmann::ordered_json& t = files.tokenizer;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added_tokens;
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = ByteLevel(false, true);
  t["post_processor"] = ByteLevel(true, false);
  t["decoder"] = ByteLevel(true, true);
  nlohmann::ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = spec.unk_token.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(spec.unk_token);
  model["continuing_subword_prefix"] = "";
  model["end_of_word_suffix"] = "";
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  model["vocab"] = vocab;
  model["merges"] = merges;
  t["model"] = model;

  nlohmann::ordered_json& c = files.tokenizer_config;
  c["add_bos_token"] = spec.add_bos_token;
  c["add_eos_token"] = false;
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  for (const auto& token : added_tokens) {
    nlohmann::ordered_json entry = token;
    entry.erase("id");
    decoder[std::to_string(token["id"].get<std::int64_t>())] = entry;
  }
  c["added_tokens_decoder"] = decoder;
  c["bos_token"] = spec.bos_token;
  c["clean_up_tokenization_spaces"] = false;
  c["eos_token"] = spec.eos_token;
  c["model_max_length"] = spec.model_max_length;
  c["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (!spec.unk_token.empty()) c["unk_token"] = spec.unk_token;
  return files;
}

}  // namespace placer::loader
