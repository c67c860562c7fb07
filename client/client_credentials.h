// What the client presents to placerd: a bearer token, and TLS settings (CA to trust the
// server with, client certificate for mTLS), read from the files the CLI flags name.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace placer::client {

struct ClientCredentials {
  std::string bearer_token;      // empty: no authorization metadata
  bool tls = false;              // false: plaintext
  std::string ca_pem;            // empty with tls: the system's trusted roots
  std::string client_cert_pem;   // both empty, or both set (mTLS)
  std::string client_key_pem;
};

struct ClientCredentialFiles {
  std::string token_file;  // first token line (blank lines and '#' comments skipped)
  bool tls = false;        // TLS with the system roots; implied by ca
  std::string ca;
  std::string cert;
  std::string key;
};

// Errors name the flag and the file (--token-file, --tls-ca, --tls-cert, --tls-key).
absl::StatusOr<ClientCredentials> LoadClientCredentials(const ClientCredentialFiles& files);

}  // namespace placer::client
