// The credentials placerd listens with: plaintext or TLS (optionally requiring client
// certificates), and, when tokens are configured, a bearer-token check that gRPC runs on each
// call's metadata before the call reaches any service, so a refused call never runs a handler.
//
// Why not a server interceptor: gRPC 1.51's server interceptors cannot fail a call before its
// handler runs. Why not grpc::AuthMetadataProcessor: InsecureServerCredentials() asserts when
// given one. gRPC core's own processor hook works for both transports, so it is used here.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>

#include "server/bearer_auth.h"
#include "server/tls_files.h"

namespace placer::server {

// `tls` nullopt: plaintext. `auth` null: no token check; otherwise it must outlive the server.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const std::optional<TlsFiles>& tls,
                                                               const BearerAuth* auth);

}  // namespace placer::server
