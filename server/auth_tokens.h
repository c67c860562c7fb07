// The bearer tokens placerd accepts (--auth-token-file), and how a presented token is checked.
// Only SHA-256 digests are kept, and every digest is compared in full, so neither the time a
// check takes nor a core dump tells an attacker anything about the tokens.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace placer::server {

class BearerTokens {
 public:
  // One token a line; blank lines and lines starting with '#' are skipped, surrounding
  // whitespace trimmed. A file that cannot be read or holds no token is an error naming it.
  static absl::StatusOr<BearerTokens> Load(const std::string& path);

  // True when `presented` equals one of the tokens. Constant time in the token's content.
  bool Accepts(absl::string_view presented) const;

  size_t size() const { return digests_.size(); }

 private:
  using Digest = std::array<unsigned char, 32>;
  static Digest Hash(absl::string_view text);
  std::vector<Digest> digests_;
};

// The current token set, swapped whole on SIGHUP while RPCs check against it.
class TokenStore {
 public:
  // Loads `path` once; the daemon refuses to start when this fails.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path);

  // Re-reads the file. On failure the old tokens stay in force and the error is returned.
  absl::Status Reload();

  bool Accepts(absl::string_view presented) const;

  const std::string& path() const { return path_; }

 private:
  TokenStore(std::string path, BearerTokens tokens);

  const std::string path_;
  mutable std::mutex mutex_;
  std::shared_ptr<const BearerTokens> tokens_;
};

}  // namespace placer::server
