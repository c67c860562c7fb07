#include "server/bearer_auth.h"

#include <google/protobuf/descriptor.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace placer::server {
namespace {

// The rpc label: a method name of placer.v1.Placer or of the Open Inference Protocol's
// service, or "unknown". A path chosen by an attacker must not become a label value, or each
// refused call could add a time series.
std::string RpcLabel(absl::string_view path) {
  for (const char* service_name : {"placer.v1.Placer", "inference.GRPCInferenceService"}) {
    const std::string prefix = absl::StrCat("/", service_name, "/");
    if (!absl::StartsWith(path, prefix)) continue;
    const std::string method(path.substr(prefix.size()));
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name);
    if (service == nullptr || service->FindMethodByName(method) == nullptr) return "unknown";
    return method;
  }
  return "unknown";
}

}  // namespace

bool BearerAuth::IsOpen(absl::string_view path) {
  return absl::StartsWith(path, "/grpc.health.v1.Health/") ||
         absl::StartsWith(path, "/grpc.reflection.v1alpha.ServerReflection/") ||
         absl::StartsWith(path, "/grpc.reflection.v1.ServerReflection/");
}

std::string BearerAuth::Check(absl::string_view path,
                              const std::vector<absl::string_view>& authorization,
                              const std::string& peer) const {
  if (IsOpen(path)) return "";
  // RFC 6750: the scheme is case-insensitive, the token is not.
  constexpr absl::string_view kScheme = "bearer ";
  bool presented = false;
  for (absl::string_view value : authorization) {
    if (value.size() <= kScheme.size() ||
        !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
      continue;
    }
    presented = true;
    if (tokens_->Accepts(absl::StripAsciiWhitespace(value.substr(kScheme.size())))) return "";
  }
  const std::string rpc = RpcLabel(path);
  metrics_->CountAuthFailure(rpc);
  spdlog::warn("refused {} from {}: {} bearer token", rpc == "unknown" ? "a call" : rpc, peer,
               presented ? "wrong" : "no");
  return presented ? "invalid bearer token"
                   : "missing bearer token: send metadata 'authorization: Bearer <token>'";
}

}  // namespace placer::server
