// tokenizer.json's "model" when its type is BPE: the vocabulary and the merges, applied by
// rank exactly as Hugging Face tokenizers applies them (lowest rank first, leftmost first among
// equals), with byte_fallback (<0xNN> tokens for characters outside the vocabulary), unk and
// fuse_unk, ignore_merges, continuing_subword_prefix and end_of_word_suffix. Pieces already
// seen are answered from a bounded cache shared by all threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::tokenizer {

class BpeModel {
 public:
  // `path` is where the model sits in the file ("model"), for errors.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model,
                                                            absl::string_view path);

  // Appends the ids of one pre-tokenized piece (well-formed UTF-8).
  void Encode(const std::string& piece, std::vector<std::int32_t>* ids) const;

  std::optional<std::int32_t> TokenToId(const std::string& token) const;
  // The vocabulary string of `id`; nullptr when no token has it.
  const std::string* IdToToken(std::int32_t id) const;
  // One past the largest id.
  std::int32_t id_limit() const { return static_cast<std::int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged_id;
  };
  static std::uint64_t PairKey(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  std::vector<std::int32_t> EncodeUncached(const std::string& piece) const;
  std::vector<std::int32_t> InitialSymbols(const std::string& piece) const;
  void ApplyMerges(std::vector<std::int32_t>* symbols) const;

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::optional<std::int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::int32_t byte_ids_[256] = {};  // <0xNN> tokens, -1 when absent

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache_;
};

}  // namespace placer::tokenizer
