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
      last_token_(started_),
      enclosing_(current_timer) {
  context->AddInitialMetadata(kRequestIdHeader, request_id_);
  current_timer = this;
  current_request_id = request_id_;
}

RequestTimer::~RequestTimer() {
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  metrics_->ObserveRequestSeconds(rpc_, seconds);
  if (sequence_started_) {
    spdlog::info("{} {} in {:.3f}s: prompt {} token(s), {} generated{}{}", rpc_, code_name_, seconds,
                 prompt_tokens_, generated_tokens_, error_message_.empty() ? "" : ": ",
                 error_message_);
  } else {
    spdlog::info("{} {} in {:.3f}s{}{}", rpc_, code_name_, seconds, error_message_.empty() ? "" : ": ",
                 error_message_);
  }
  current_timer = enclosing_;
  current_request_id = enclosing_ != nullptr ? enclosing_->request_id_ : std::string();
}

void RequestTimer::StartSequence(uint64_t prompt_tokens) {
  if (sequence_started_) return;
  sequence_started_ = true;
  prompt_tokens_ = prompt_tokens;
  metrics_->SequenceStarted(prompt_tokens);
}

void RequestTimer::OnToken() {
  const Clock::time_point now = Clock::now();
  metrics_->TokenGenerated(std::chrono::duration<double>(now - last_token_).count(),
                           generated_tokens_ == 0);
  last_token_ = now;
  ++generated_tokens_;
}

void RequestTimer::NoteStatus(const std::string& code_name, const grpc::Status& status) {
  if (current_timer == nullptr) return;
  current_timer->code_name_ = code_name;
  current_timer->error_message_ = status.error_message();
}

const std::string& RequestTimer::CurrentRequestId() { return current_request_id; }

}  // namespace placer::server
