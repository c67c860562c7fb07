// Writes the fuzzers' seed corpus: make_seed_corpus OUT_DIR
#include <iostream>

#include "tests/fuzz/seed_corpus.h"

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
  std::cout << "seed corpus in " << argv[1] << ": " << corpus->safetensors_header.size()
            << " safetensors, " << corpus->shard_index.size() << " indexes, "
            << corpus->model_config.size() << " configs\n";
  return 0;
}
