#include "tests/tokenizer/sample_tokenizers.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "loader/tools/bpe_tokenizer_builder.h"

namespace placer::testing {
namespace {

constexpr char kSpace[] = "\xE2\x96\x81";  // ▁

loader::TokenizerFiles Build(const std::string& arch, int vocab_size) {
  loader::TokenizerSpec spec;
  spec.vocab_size = vocab_size;
  // As loader/tools/make_checkpoint_main.cc fills it.
  if (arch == "gpt2") {
    spec.special_tokens = {"<|endoftext|>"};
    spec.bos_token = spec.eos_token = spec.unk_token = "<|endoftext|>";
  } else {
    spec.special_tokens = {"<unk>", "<s>", "</s>"};
    spec.unk_token = "<unk>";
    spec.bos_token = "<s>";
    spec.eos_token = "</s>";
    spec.add_bos_token = true;
  }
  auto built = loader::BuildByteLevelBpeTokenizer(spec);
  if (!built.ok()) throw std::runtime_error(std::string(built.status().message()));
  return *std::move(built);
}

nlohmann::json Special(int id, const std::string& content) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

}  // namespace

nlohmann::json MakeCheckpointTokenizerJson(const std::string& arch, int vocab_size) {
  return nlohmann::json::parse(Build(arch, vocab_size).tokenizer.dump());
}

nlohmann::json MakeCheckpointTokenizerConfig(const std::string& arch, int vocab_size) {
  return nlohmann::json::parse(Build(arch, vocab_size).tokenizer_config.dump());
}

nlohmann::json SentencePieceStyleTokenizerJson(SentencePieceLayout layout) {
  nlohmann::json vocab = nlohmann::json::object();
  int next = 0;
  for (const char* special : {"<unk>", "<s>", "</s>"}) vocab[special] = next++;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = next++;
  }
  vocab[kSpace] = next++;
  std::string singles = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-";
  for (const char c : singles) vocab[std::string(1, c)] = next++;
  vocab["\xC3\xA9"] = next++;  // é
  const std::string s = kSpace;
  // Ordered so the words below merge whole, as a trained merge list would.
  const std::vector<std::pair<std::string, std::string>> merges = {
      {s, "t"},        {s, "h"},  {"e", "l"},        {"el", "l"}, {s + "h", "ell"},
      {s + "hell", "o"}, {"h", "e"}, {s + "t", "he"}, {s, "w"},    {"o", "r"},
      {s + "w", "or"}, {"l", "d"}, {s + "wor", "ld"}, {s, "a"},    {"n", "d"},
      {s + "a", "nd"}, {"i", "n"}, {"in", "g"},      {"e", "r"}};
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [left, right] : merges) {
    merge_list.push_back(left + " " + right);
    if (!vocab.contains(left + right)) vocab[left + right] = next++;
  }

  nlohmann::json t;
  t["version"] = "1.0";
  t["added_tokens"] = {Special(0, "<unk>"), Special(1, "<s>"), Special(2, "</s>")};
  if (layout == SentencePieceLayout::kNormalizer) {
    t["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        {{{"type", "Prepend"}, {"prepend", kSpace}},
                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}};
    t["pre_tokenizer"] = nullptr;
    t["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  } else {
    t["normalizer"] = nullptr;
    t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSpace},
                          {"prepend_scheme", "first"}, {"split", false}};
    t["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}}}}};
  }
  t["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  t["model"] = {{"type", "BPE"},        {"dropout", nullptr},   {"unk_token", "<unk>"},
                {"fuse_unk", true},     {"byte_fallback", true}, {"vocab", vocab},
                {"merges", merge_list}};
  return t;
}

nlohmann::json SentencePieceStyleTokenizerConfig() {
  return {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"},
          {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
}

}  // namespace placer::testing
