#include "server/request_timer.h"

#include <spdlog/spdlog.h>

#include <random>

#include "absl/strings/str_format.h"

namespace placer::server {
namespace {

constexpr char kRequestIdHeader[] = "x-request-id";

thread_local RequestTimer* current_timer = nullptr;
thread_local std::string current_request_id;

bool UsableRequestId(const grpc::string_ref& value) {
  if (value.empty() || value.size() > 128) return false;
  for (char c : value) {
    // Log pipelines and JSON must carry it verbatim.
    if (c < 0x21 || c > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

std::string RandomRequestId() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return absl::StrFormat("%016x", generator());
}

}  // namespace

std::string ChooseRequestId(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find(kRequestIdHeader);
  if (found != metadata.end() && UsableRequestId(found->second)) {
    return std::string(found->second.data(), found->second.size());
  }
  return RandomRequestId();
}

RequestTimer::RequestTimer(DaemonMetrics* metrics, const char* rpc, grpc::ServerContext* context)
    : metrics_(metrics),
      rpc_(rpc),
      request_id_(ChooseRequestId(*context)),
      started_(Clock::now()),
      sequence_(metrics),
      enclosing_(current_timer) {
  context->AddInitialMetadata(kRequestIdHeader, request_id_);
  current_timer = this;
  current_request_id = request_id_;
}

RequestTimer::~RequestTimer() {
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  metrics_->ObserveRequestSeconds(rpc_, seconds);
  if (sequence_.started()) {
    spdlog::info("{} {} in {:.3f}s: prompt {} token(s), {} generated{}{}", rpc_, code_name_, seconds,
                 sequence_.prompt_tokens(), sequence_.generated_tokens(),
                 error_message_.empty() ? "" : ": ",
                 error_message_);
  } else {
    spdlog::info("{} {} in {:.3f}s{}{}", rpc_, code_name_, seconds, error_message_.empty() ? "" : ": ",
                 error_message_);
  }
  current_timer = enclosing_;
  current_request_id = enclosing_ != nullptr ? enclosing_->request_id_ : std::string();
}

void RequestTimer::NoteStatus(const std::string& code_name, const grpc::Status& status) {
  if (current_timer == nullptr) return;
  current_timer->code_name_ = code_name;
  current_timer->error_message_ = status.error_message();
}

const std::string& RequestTimer::CurrentRequestId() { return current_request_id; }

ScopedRequestId::ScopedRequestId(std::string id) : previous_(std::move(current_request_id)) {
  current_request_id = std::move(id);
}

ScopedRequestId::~ScopedRequestId() { current_request_id = std::move(previous_); }

}  // namespace placer::server
