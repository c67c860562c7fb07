// Writes the fuzzers' seed corpus: make_seed_corpus OUT_DIR
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/fuzz/seed_corpus.h"
#include "tests/fuzz/tokenizer_fuzz_entry_points.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_DIR\n";
    return 2;
  }
  absl::StatusOr<placer::fuzz::SeedCorpus> corpus = placer::fuzz::WriteSeedCorpus(argv[1]);
  if (!corpus.ok()) {
    std::cerr << corpus.status().message() << "\n";
    return 1;
  }
  for (const auto& [target, seeds] :
       {std::make_pair("tokenizer_json", placer::fuzz::TokenizerJsonSeeds()),
        std::make_pair("tokenizer_text", placer::fuzz::TokenizerTextSeeds())}) {
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / target;
    std::filesystem::create_directories(dir);
    for (std::size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream(dir / ("seed-" + std::to_string(i)), std::ios::binary) << seeds[i];
    }
  }
  std::cout << "seed corpus in " << argv[1] << ": " << corpus->safetensors_header.size()
            << " safetensors, " << corpus->shard_index.size() << " indexes, "
            << corpus->model_config.size() << " configs\n";
  return 0;
}
