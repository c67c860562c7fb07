// Runs the tokenizer's fuzz entry points on their seeds, on deterministic mutations of them
// and on saved crash reproducers (tests/fuzz/regressions/tokenizer_*), so `make test` keeps
// what fuzzing found. An entry point traps (failing the test) when an invariant breaks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/tokenizer/tokenizer.h"
#include "tests/fuzz/tokenizer_fuzz_entry_points.h"

namespace placer::fuzz {
namespace {

void Feed(int (*target)(const std::uint8_t*, std::size_t), const std::string& bytes) {
  target(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

TEST(TokenizerFuzzRegression, JsonSeedsLoad) {
  for (const std::string& seed : TokenizerJsonSeeds()) {
    auto tokenizer = tokenizer::Tokenizer::FromJsonText(seed.substr(0, seed.find('\0')), "");
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  }
}

// Every 97th truncation, a byte flipped every 61 bytes, a deletion every 89: cheap,
// deterministic neighbours of valid files.
TEST(TokenizerFuzzRegression, MutatedJsonSeeds) {
  for (const std::string& seed : TokenizerJsonSeeds()) {
    Feed(FuzzTokenizerJson, seed);
    for (std::size_t n = 0; n < seed.size(); n += 97) Feed(FuzzTokenizerJson, seed.substr(0, n));
    for (std::size_t i = 0; i < seed.size(); i += 61) {
      std::string flipped = seed;
      flipped[i] = static_cast<char>(flipped[i] ^ 0x20);
      Feed(FuzzTokenizerJson, flipped);
    }
    for (std::size_t i = 0; i < seed.size(); i += 89) {
      std::string deleted = seed;
      deleted.erase(i, 1);
      Feed(FuzzTokenizerJson, deleted);
    }
  }
}

TEST(TokenizerFuzzRegression, MutatedTextSeeds) {
  for (const std::string& seed : TokenizerTextSeeds()) {
    Feed(FuzzTokenizerText, seed);
    for (std::size_t n = 1; n <= seed.size(); ++n) Feed(FuzzTokenizerText, seed.substr(0, n));
    for (std::size_t i = 1; i < seed.size(); ++i) {
      std::string flipped = seed;
      flipped[i] = static_cast<char>(flipped[i] ^ 0x80);
      Feed(FuzzTokenizerText, flipped);
    }
  }
}

TEST(TokenizerFuzzRegression, SavedReproducers) {
  namespace fs = std::filesystem;
  int fed = 0;
  for (const auto& [target, entry] :
       {std::make_pair("tokenizer_json", FuzzTokenizerJson),
        std::make_pair("tokenizer_text", FuzzTokenizerText)}) {
    const fs::path dir = fs::path(PLACER_FUZZ_REGRESSIONS_DIR) / target;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const auto& file : fs::directory_iterator(dir)) {
      if (file.path().filename() == ".keep") continue;
      std::ifstream in(file.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      Feed(entry, bytes.str());
      ++fed;
    }
  }
  RecordProperty("reproducers", fed);
}

}  // namespace
}  // namespace placer::fuzz
