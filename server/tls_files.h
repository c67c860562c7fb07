// The PEM files behind --tls-cert, --tls-key and --tls-client-ca, read and checked before
// gRPC sees them: gRPC only says "cannot bind" for a bad certificate, which names nothing.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace placer::server {

struct TlsFiles {
  std::string cert_chain_pem;  // --tls-cert: server certificate (and intermediates)
  std::string private_key_pem;  // --tls-key: its private key
  std::string client_ca_pem;  // --tls-client-ca: empty unless client certificates are required
};

// nullopt when TLS is off (no --tls-cert). Errors name the flag and the file: unreadable,
// not PEM, or a key that does not belong to the certificate.
absl::StatusOr<std::optional<TlsFiles>> LoadTlsFiles(const std::string& cert_path,
                                                     const std::string& key_path,
                                                     const std::string& client_ca_path);

}  // namespace placer::server
