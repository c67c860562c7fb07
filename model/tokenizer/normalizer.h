// tokenizer.json's "normalizer": rewrites each stretch of text between added tokens before it
// is split. Supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip and Sequence
// of those; anything else is refused at load time, naming the path.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is well-formed UTF-8 and stays so.
  virtual absl::StatusOr<std::string> Apply(std::string text) const = 0;
};

// nullptr for a null normalizer.
absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& value,
                                                               absl::string_view path);

}  // namespace placer::tokenizer
