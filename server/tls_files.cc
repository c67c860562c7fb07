#include "server/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer::server {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

absl::Status Bad(const std::string& flag, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, ": ", why));
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(flag, path, "cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::unique_ptr<X509, X509Free> FirstCertificate(const std::string& pem) {
  auto bio = MemoryBio(pem);
  return std::unique_ptr<X509, X509Free>(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace

absl::StatusOr<std::optional<TlsFiles>> LoadTlsFiles(const std::string& cert_path,
                                                     const std::string& key_path,
                                                     const std::string& client_ca_path) {
  if (cert_path.empty() && key_path.empty()) {
    if (!client_ca_path.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca: client certificates need TLS; give --tls-cert and --tls-key too");
    }
    return std::optional<TlsFiles>();
  }
  if (cert_path.empty() || key_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        cert_path.empty() ? "--tls-key" : "--tls-cert",
        ": TLS needs both --tls-cert and --tls-key"));
  }
  // Failed parses leave entries on OpenSSL's thread-local error queue; gRPC's handshakes on
  // this thread must not mistake them for their own, whichever way this function returns.
  struct ClearOpenSslErrors {
    ~ClearOpenSslErrors() { ERR_clear_error(); }
  } clear_errors;
  TlsFiles files;
  PLACER_ASSIGN_OR_RETURN(auto cert, ReadFile("--tls-cert", cert_path));
  files.cert_chain_pem = std::move(cert);
  PLACER_ASSIGN_OR_RETURN(auto key, ReadFile("--tls-key", key_path));
  files.private_key_pem = std::move(key);

  auto certificate = FirstCertificate(files.cert_chain_pem);
  if (certificate == nullptr) {
    return Bad("--tls-cert", cert_path, "no PEM certificate in the file");
  }
  auto key_bio = MemoryBio(files.private_key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> private_key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (private_key == nullptr) {
    return Bad("--tls-key", key_path, "no unencrypted PEM private key in the file");
  }
  if (X509_check_private_key(certificate.get(), private_key.get()) != 1) {
    return Bad("--tls-key", key_path, absl::StrCat("does not match the certificate in ", cert_path));
  }
  if (!client_ca_path.empty()) {
    PLACER_ASSIGN_OR_RETURN(auto ca, ReadFile("--tls-client-ca", client_ca_path));
    files.client_ca_pem = std::move(ca);
    if (FirstCertificate(files.client_ca_pem) == nullptr) {
      return Bad("--tls-client-ca", client_ca_path, "no PEM certificate in the file");
    }
  }
  return std::optional<TlsFiles>(std::move(files));
}

}  // namespace placer::server
