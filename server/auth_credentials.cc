#include "server/auth_credentials.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/str_cat.h"

namespace placer::server {
namespace {

absl::string_view View(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                          GRPC_SLICE_LENGTH(slice));
}

// Who called, as far as the security layer knows: the client certificate's subject under
// mTLS, otherwise the transport. (The socket address is not exposed at this layer.)
std::string PeerOf(const grpc_auth_context* context) {
  std::string transport = "unknown transport";
  grpc_auth_property_iterator it =
      grpc_auth_context_find_properties_by_name(context, GRPC_X509_CN_PROPERTY_NAME);
  if (const grpc_auth_property* cn = grpc_auth_property_iterator_next(&it)) {
    return absl::StrCat("client certificate CN=", absl::string_view(cn->value, cn->value_length));
  }
  it = grpc_auth_context_find_properties_by_name(context,
                                                 GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  if (const grpc_auth_property* type = grpc_auth_property_iterator_next(&it)) {
    transport = std::string(type->value, type->value_length);
  }
  return absl::StrCat("a client without certificate (", transport, ")");
}

// grpc_auth_metadata_processor::process. Runs inline on gRPC's thread: the check is an
// in-memory hash and compare, nothing that blocks.
void ProcessMetadata(void* state, grpc_auth_context* context, const grpc_metadata* md,
                     size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const auto* auth = static_cast<const BearerAuth*>(state);
  absl::string_view path;
  std::vector<absl::string_view> authorization;
  std::vector<grpc_metadata> consumed;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = View(md[i].key);
    if (key == ":path") path = View(md[i].value);
    if (key == "authorization") {
      authorization.push_back(View(md[i].value));
      consumed.push_back(md[i]);  // handlers never see the token
    }
  }
  const std::string refusal = auth->Check(path, authorization, PeerOf(context));
  if (refusal.empty()) {
    done(user_data, consumed.data(), consumed.size(), nullptr, 0, GRPC_STATUS_OK, nullptr);
  } else {
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, refusal.c_str());
  }
}

// grpc::ServerCredentials over core credentials we built ourselves, so the processor can be
// attached whatever the transport. AddPortToServer is the one hook grpc::Server calls.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CoreServerCredentials(grpc_server_credentials* core) : core_(core) {}
  ~CoreServerCredentials() override { grpc_server_credentials_release(core_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {}

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), core_);
  }

  grpc_server_credentials* core_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const std::optional<TlsFiles>& tls,
                                                               const BearerAuth* auth) {
  grpc_server_credentials* core = nullptr;
  if (tls) {
    grpc_ssl_pem_key_cert_pair pair{tls->private_key_pem.c_str(), tls->cert_chain_pem.c_str()};
    const bool mtls = !tls->client_ca_pem.empty();
    core = grpc_ssl_server_credentials_create_ex(
        mtls ? tls->client_ca_pem.c_str() : nullptr, &pair, 1,
        mtls ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        nullptr);
  } else {
    core = grpc_insecure_server_credentials_create();
  }
  if (auth != nullptr) {
    grpc_server_credentials_set_auth_metadata_processor(
        core, grpc_auth_metadata_processor{&ProcessMetadata, nullptr,
                                           const_cast<BearerAuth*>(auth)});
  }
  return std::make_shared<CoreServerCredentials>(core);
}

}  // namespace placer::server
