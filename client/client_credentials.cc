#include "client/client_credentials.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<ClientCredentials> LoadClientCredentials(const ClientCredentialFiles& files) {
  ClientCredentials credentials;
  if (!files.token_file.empty()) {
    PLACER_ASSIGN_OR_RETURN(auto text, ReadFile("--token-file", files.token_file));
    std::istringstream lines(text);
    std::string line;
    while (credentials.bearer_token.empty() && std::getline(lines, line)) {
      const std::string token(absl::StripAsciiWhitespace(line));
      if (!token.empty() && token.front() != '#') credentials.bearer_token = token;
    }
    if (credentials.bearer_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file: ", files.token_file, " holds no token"));
    }
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (client certificate)");
  }
  credentials.tls = files.tls || !files.ca.empty() || !files.cert.empty();
  if (!files.ca.empty()) {
    PLACER_ASSIGN_OR_RETURN(auto ca, ReadFile("--tls-ca", files.ca));
    credentials.ca_pem = std::move(ca);
  }
  if (!files.cert.empty()) {
    PLACER_ASSIGN_OR_RETURN(auto cert, ReadFile("--tls-cert", files.cert));
    PLACER_ASSIGN_OR_RETURN(auto key, ReadFile("--tls-key", files.key));
    credentials.client_cert_pem = std::move(cert);
    credentials.client_key_pem = std::move(key);
  }
  return credentials;
}

}  // namespace placer::client
