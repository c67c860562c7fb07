#include "server/auth_tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "base/status_macros.h"

namespace placer::server {

BearerTokens::Digest BearerTokens::Hash(absl::string_view text) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

absl::StatusOr<BearerTokens> BearerTokens::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file: cannot read ", path));
  }
  BearerTokens tokens;
  std::string line;
  while (std::getline(in, line)) {
    const absl::string_view token = absl::StripAsciiWhitespace(line);
    if (token.empty() || token.front() == '#') continue;
    tokens.digests_.push_back(Hash(token));
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file: error while reading ", path));
  }
  if (tokens.digests_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth-token-file: ", path, " holds no token (one a line; '#' starts a comment)"));
  }
  return tokens;
}

bool BearerTokens::Accepts(absl::string_view presented) const {
  // Digests have one length whatever the token's, and no early exit: every token is compared
  // in full, so timing reveals neither which bytes matched nor which token did.
  const Digest digest = Hash(presented);
  int matches = 0;
  for (const Digest& known : digests_) {
    matches |= CRYPTO_memcmp(known.data(), digest.data(), digest.size()) == 0 ? 1 : 0;
  }
  return matches != 0;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& path) {
  PLACER_ASSIGN_OR_RETURN(auto tokens, BearerTokens::Load(path));
  return std::unique_ptr<TokenStore>(new TokenStore(path, std::move(tokens)));
}

TokenStore::TokenStore(std::string path, BearerTokens tokens)
    : path_(std::move(path)), tokens_(std::make_shared<const BearerTokens>(std::move(tokens))) {}

absl::Status TokenStore::Reload() {
  PLACER_ASSIGN_OR_RETURN(auto tokens, BearerTokens::Load(path_));
  auto fresh = std::make_shared<const BearerTokens>(std::move(tokens));
  std::lock_guard<std::mutex> lock(mutex_);
  tokens_ = std::move(fresh);
  return absl::OkStatus();
}

bool TokenStore::Accepts(absl::string_view presented) const {
  std::shared_ptr<const BearerTokens> tokens;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens = tokens_;
  }
  return tokens->Accepts(presented);
}

}  // namespace placer::server
