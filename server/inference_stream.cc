// ModelStreamInfer: Triton's bidirectional stream. Each request read from the stream runs on a
// thread of its own, so that several requests of one stream generate concurrently (the engine
// batches them) while the stream goes on reading; their responses interleave, each carrying
// its request's id. A request that fails is answered in-stream with error_message and the
// stream goes on, as Triton does. The stream ends when the client has sent everything and
// every request is answered, or when it is cancelled: then every generation stops within one
// engine step and gives its KV blocks back. A drain waits for running requests, not for open
// streams: new requests on one are answered UNAVAILABLE, and the stream is cancelled when the
// server stops.
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <list>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"
#include "server/inference_service.h"
#include "server/model_admission.h"
#include "server/request_timer.h"

namespace placer::server {
namespace {

using StreamIo =
    grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>;

// Writes from many request threads, one at a time (gRPC allows one outstanding write); once a
// write fails the client is gone and every later one is refused at once.
class StreamWriter {
 public:
  explicit StreamWriter(StreamIo* stream) : stream_(stream) {}

  bool Write(const inference::ModelStreamInferResponse& response) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load()) return false;
    if (!stream_->Write(response)) failed_.store(true);
    return !failed_.load();
  }
  bool failed() const { return failed_.load(); }

 private:
  StreamIo* stream_;
  std::mutex mutex_;
  std::atomic<bool> failed_{false};
};

inference::ModelStreamInferResponse ErrorResponse(const inference::ModelInferRequest& request,
                                                  const absl::Status& status) {
  inference::ModelStreamInferResponse response;
  response.set_error_message(status.ToString());
  response.mutable_infer_response()->set_id(request.id());
  response.mutable_infer_response()->set_model_name(request.model_name());
  response.mutable_infer_response()->set_model_version(request.model_version());
  return response;
}

struct RequestThread {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

grpc::Status InferenceService::ModelStreamInfer(grpc::ServerContext* context, StreamIo* stream) {
  RequestTimer timer(metrics_, "ModelStreamInfer", context);
  // Each request holds a ticket of its own while it runs, not the stream: an open stream with
  // nothing running must not keep a drain waiting (tritonclient keeps its stream open).
  if (!gate_->TryEnter().admitted()) return Finish("ModelStreamInfer", DrainingStatus());
  const std::string stream_id = RequestTimer::CurrentRequestId();
  StreamWriter out(stream);
  std::list<RequestThread> running;
  const auto reap = [&running](bool wait) {
    for (auto it = running.begin(); it != running.end();) {
      if (wait || it->done->load()) {
        it->thread.join();
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  };

  for (inference::ModelInferRequest request; stream->Read(&request);) {
    reap(/*wait=*/false);
    std::shared_ptr<const ModelSnapshot> model;
    RequestGate::Ticket request_ticket = gate_->TryEnter();
    grpc::Status admitted = AdmitModelCall(request_ticket, *model_, &model);
    if (!admitted.ok()) {
      out.Write(
          ErrorResponse(request, absl::Status(static_cast<absl::StatusCode>(admitted.error_code()),
                                              admitted.error_message())));
      continue;
    }
    auto prepared = Prepare(*model, request);
    if (!prepared.ok()) {
      out.Write(ErrorResponse(request, prepared.status()));
      continue;
    }
    const std::size_t most = static_cast<std::size_t>(model->limits.max_batch_size) +
                             static_cast<std::size_t>(std::max(options_.max_queue, 0));
    if (running.size() >= most) {
      out.Write(ErrorResponse(
          request, absl::ResourceExhaustedError(absl::StrCat(
                       "this stream already has ", running.size(),
                       " requests running or queued (--max-batch-size plus --max-queue); "
                       "wait for responses before sending more"))));
      continue;
    }
    RequestThread& thread = running.emplace_back();
    thread.thread = std::thread([this, context, &out, &stream_id, model, done = thread.done,
                                 ticket = std::move(request_ticket), request = std::move(request),
                                 prepared = *std::move(prepared)] {
      const ScopedRequestId id(stream_id);
      const auto started = std::chrono::steady_clock::now();
      SequenceMetrics sequence(metrics_);
      const absl::Status status = Run(
          context, *model, request, prepared, &sequence, [&out] { return out.failed(); },
          [&out](inference::ModelInferResponse response, bool) {
            inference::ModelStreamInferResponse message;
            *message.mutable_infer_response() = std::move(response);
            return out.Write(message);
          });
      if (!status.ok()) out.Write(ErrorResponse(request, status));
      spdlog::info(
          "ModelStreamInfer request '{}' {} in {:.3f}s: prompt {} token(s), {} generated",
          request.id(), status.ok() ? "OK" : status.ToString(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
          sequence.prompt_tokens(), sequence.generated_tokens());
      done->store(true);
      (void)ticket;  // held until here: the drain waits for this request
    });
    request = inference::ModelInferRequest();
  }
  reap(/*wait=*/true);
  if (context->IsCancelled()) {
    return Finish("ModelStreamInfer",
                  grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
  }
  return Finish("ModelStreamInfer", grpc::Status::OK);
}

}  // namespace placer::server
