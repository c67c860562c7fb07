// One Placer RPC as metrics and logs see it: created first thing in a handler, it gives the
// request an id (the client's x-request-id, or a fresh one), sends that id back in the initial
// metadata, tags every log line the handler's thread writes with it, and on destruction
// observes placer_request_duration_seconds and logs one line with the status. Generate
// streams also report their sequence and tokens through it.
#pragma once

#include <grpcpp/server_context.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "server/metrics.h"
#include "server/sequence_metrics.h"

namespace placer::server {

class RequestTimer {
 public:
  RequestTimer(DaemonMetrics* metrics, const char* rpc, grpc::ServerContext* context);
  ~RequestTimer();
  RequestTimer(const RequestTimer&) = delete;
  RequestTimer& operator=(const RequestTimer&) = delete;

  // The request's one generated sequence (Generate, ModelInfer), for its token metrics; the
  // log line reports its prompt and generated tokens.
  SequenceMetrics& sequence() { return sequence_; }

  // Records the status the handler answers with (code_name: "OK", "UNAVAILABLE", ...) for the
  // request's log line. Applies to the timer running on the calling thread; a no-op outside
  // a timed request.
  static void NoteStatus(const std::string& code_name, const grpc::Status& status);

  // The id of the request the calling thread is serving; empty outside one.
  static const std::string& CurrentRequestId();

 private:
  using Clock = std::chrono::steady_clock;

  DaemonMetrics* metrics_;
  const char* rpc_;
  std::string request_id_;
  Clock::time_point started_;
  SequenceMetrics sequence_;
  std::string code_name_ = "(no status)";
  std::string error_message_;
  RequestTimer* enclosing_;  // the thread's previous timer (none in practice)
};

// Tags the log lines of the calling thread with a request's id while in scope: for threads an
// RPC starts (each request of a ModelStreamInfer stream runs on its own).
class ScopedRequestId {
 public:
  explicit ScopedRequestId(std::string id);
  ~ScopedRequestId();
  ScopedRequestId(const ScopedRequestId&) = delete;
  ScopedRequestId& operator=(const ScopedRequestId&) = delete;

 private:
  std::string previous_;
};

// The x-request-id value to use: the client's when it is 1..128 printable ASCII characters
// without quotes or backslashes, otherwise 16 random hex digits.
std::string ChooseRequestId(const grpc::ServerContext& context);

}  // namespace placer::server
