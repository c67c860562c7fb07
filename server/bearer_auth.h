// Decides whether one incoming call may proceed: Placer RPCs need `authorization: Bearer
// <token>`; health and reflection stay open so probes and grpcurl work without secrets.
// Refusals are logged (method and peer, never the token) and counted.
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "server/auth_tokens.h"
#include "server/metrics.h"

namespace placer::server {

class BearerAuth {
 public:
  BearerAuth(const TokenStore* tokens, DaemonMetrics* metrics)
      : tokens_(tokens), metrics_(metrics) {}

  // `path` is the call's ":path" ("/placer.v1.Placer/Forward"); `authorization` the values
  // of its authorization metadata; `peer` who called, for the log. Empty string: allowed;
  // otherwise the UNAUTHENTICATED message to send (which never contains a token).
  std::string Check(absl::string_view path, const std::vector<absl::string_view>& authorization,
                    const std::string& peer) const;

  // True for calls anyone may make (health checks, reflection).
  static bool IsOpen(absl::string_view path);

 private:
  const TokenStore* tokens_;
  DaemonMetrics* metrics_;
};

}  // namespace placer::server
