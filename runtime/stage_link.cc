// The one translation unit that includes c10d (compiled with USE_C10D_GLOO; the Gloo headers
// come from libgloo-dev, the symbols from Debian's libtorch_cpu).
#include "runtime/stage_link.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/hop_buffer.h"

namespace placer::runtime {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kHeaderInts = kStageHeaderInts;
static_assert(kWireF32 == static_cast<int64_t>(at::kFloat) &&
              kWireBF16 == static_cast<int64_t>(at::kBFloat16) &&
              kWireF16 == static_cast<int64_t>(at::kHalf));
constexpr int kTag = 0;             // one ordered stream per pair of ranks

}  // namespace

struct StageLink::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::mutex send_mutex;
  std::map<int, Clock::time_point> last_send;  // send_mutex
  // Reused receive buffers per peer: the header, the layout, the hidden states per dtype.
  struct Buffers {
    at::Tensor header = at::empty({kHeaderInts}, at::kLong);
    at::Tensor layout;
    HopBuffer hidden;
  };
  std::map<int, Buffers> buffers;  // created at Connect, one per peer
  std::mutex stop_mutex;
  std::condition_variable stop_changed;
  bool stopping = false;
  std::vector<std::thread> heartbeats;
};

StageLink::StageLink(const StageLinkOptions& options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

StageLink::~StageLink() {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    impl_->stopping = true;
  }
  impl_->stop_changed.notify_all();
  for (std::thread& thread : impl_->heartbeats) thread.join();
}

std::string StageLink::StageName(int rank, int size) {
  return absl::StrCat("stage ", rank, " (rank ", rank, " of ", size, ")");
}

absl::StatusOr<std::unique_ptr<StageLink>> StageLink::Connect(const StageLinkOptions& options) {
  const size_t colon = options.rendezvous.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.rendezvous.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rendezvous '", options.rendezvous, "': expected HOST:PORT of the leader's store"));
  }
  if (options.size < 2 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("--stage-rank ", options.rank,
                                                   ": must be in [0, --stages ", options.size, ")"));
  }
  std::string host = options.rendezvous.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::unique_ptr<StageLink> link(new StageLink(options));
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = options.size;
    store_options.waitWorkers = false;
    store_options.timeout = options.rendezvous_timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
    link->impl_->store = store;
    auto group_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    group_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.listen_address));
    // Gloo's mesh connects with the store's (rendezvous) deadline, then every operation has
    // the stage timeout.
    link->impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", store), options.rank, options.size,
        group_options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        StageName(options.rank, options.size), ": cannot join the group at ", options.rendezvous,
        " (Gloo on ", options.listen_address, ") within ", options.rendezvous_timeout.count(),
        "ms: ", c10::GetExceptionString(e)));
  }
  for (int peer = 0; peer < options.size; ++peer) {
    if (peer != options.rank) link->impl_->buffers[peer];
  }
  return link;
}

absl::Status StageLink::Publish(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous store ", options_.rendezvous, ": cannot set ", key, ": ", e.what()));
  }
}

absl::StatusOr<std::string> StageLink::Read(const std::string& key,
                                            std::chrono::milliseconds timeout) {
  try {
    impl_->store->wait({key}, timeout);
    const std::vector<uint8_t> value = impl_->store->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos) {
      return absl::UnavailableError(absl::StrCat("rendezvous store ", options_.rendezvous, ": no ",
                                                 key, " within ", timeout.count(), "ms"));
    }
    return absl::UnavailableError(absl::StrCat("rendezvous store ", options_.rendezvous,
                                               ": lost while waiting for ", key, ": ",
                                               what.substr(0, what.find('\n'))));
  }
}

namespace {

// One tensor to `to` with the stage deadline; c10d reports failures as exceptions.
void SendTensor(c10d::ProcessGroupGloo& group, at::Tensor tensor, int to,
                std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> tensors{std::move(tensor)};
  group.send(tensors, to, kTag)->wait(timeout);
}

void ReceiveTensor(c10d::ProcessGroupGloo& group, at::Tensor tensor, int from,
                   std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> tensors{std::move(tensor)};
  group.recv(tensors, from, kTag)->wait(timeout);
}

// A received tensor of `numel` elements in the peer's reused buffer (grown, never shrunk).
at::Tensor BufferFor(at::Tensor& buffer, int64_t numel, at::ScalarType dtype) {
  if (!buffer.defined() || buffer.numel() < numel) buffer = at::empty({numel}, dtype);
  return buffer.narrow(0, 0, numel);
}

}  // namespace

absl::Status StageLink::Send(int to, const StageMessage& message) {
  std::vector<int64_t> layout = message.layout;
  if (message.kind == StageMessageKind::kStepFailed) {
    layout.assign(message.error.begin(), message.error.end());  // one char per int, short
  }
  const bool has_hidden = message.hidden.defined() && message.hidden.numel() > 0;
  const int64_t rows = has_hidden ? message.hidden.size(0) : 0;
  const int64_t width = has_hidden ? message.hidden.numel() / std::max<int64_t>(rows, 1) : 0;
  const int64_t kv_blocks = kv_blocks_source_ ? kv_blocks_source_() : kv_blocks_received_.load();
  at::Tensor header = at::tensor(
      {static_cast<int64_t>(message.kind), message.step, static_cast<int64_t>(layout.size()), rows,
       width, has_hidden ? static_cast<int64_t>(message.hidden.scalar_type()) : 0,
       std::clamp<int64_t>(kv_blocks, 0, std::numeric_limits<int32_t>::max())},
      at::kLong);
  std::lock_guard<std::mutex> lock(impl_->send_mutex);
  try {
    SendTensor(*impl_->group, header, to, options_.timeout);
    uint64_t bytes = kHeaderInts * sizeof(int64_t);
    if (!layout.empty()) {
      SendTensor(*impl_->group, at::tensor(layout, at::kLong), to, options_.timeout);
      bytes += layout.size() * sizeof(int64_t);
    }
    if (has_hidden) {
      at::Tensor hidden = message.hidden.contiguous().view({-1});
      SendTensor(*impl_->group, hidden, to, options_.timeout);
      bytes += hidden.numel() * hidden.element_size();
    }
    impl_->last_send[to] = Clock::now();
    if (message.kind != StageMessageKind::kHeartbeat) bytes_sent_ += bytes;
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(StageName(to, options_.size),
                                               ": cannot send to it: ", c10::GetExceptionString(e)));
  }
  return absl::OkStatus();
}

absl::StatusOr<StageMessage> StageLink::Receive(int from) {
  Impl::Buffers& buffers = impl_->buffers.at(from);
  const auto started = Clock::now();
  struct WaitCounter {
    std::atomic<uint64_t>& total;
    Clock::time_point started;
    ~WaitCounter() {
      total += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count();
    }
  } counter{receive_wait_ns_, started};
  try {
    while (true) {
      ReceiveTensor(*impl_->group, buffers.header, from, options_.timeout);
      absl::StatusOr<StageHeader> header = ParseStageHeader(buffers.header.data_ptr<int64_t>());
      if (closing_) return absl::CancelledError("the link is closing");
      if (!header.ok()) {
        return absl::UnavailableError(
            absl::StrCat(StageName(from, options_.size), ": sent a ", header.status().message()));
      }
      if (header->kv_blocks_in_use != kv_blocks_received_.exchange(header->kv_blocks_in_use) &&
          on_kv_blocks_) {
        on_kv_blocks_(header->kv_blocks_in_use);
      }
      if (header->kind == StageMessageKind::kHeartbeat) continue;
      StageMessage message;
      message.kind = header->kind;
      message.step = header->step;
      const int64_t layout_ints = header->layout_ints, rows = header->rows, width = header->width;
      if (layout_ints > 0) {
        at::Tensor layout = BufferFor(buffers.layout, layout_ints, at::kLong);
        ReceiveTensor(*impl_->group, layout, from, options_.timeout);
        const int64_t* ints = layout.data_ptr<int64_t>();
        if (message.kind == StageMessageKind::kStepFailed) {
          message.error.assign(ints, ints + layout_ints);
        } else {
          message.layout.assign(ints, ints + layout_ints);
        }
      }
      if (rows * width > 0) {
        const auto dtype = static_cast<at::ScalarType>(header->dtype);
        at::Tensor hidden = buffers.hidden.Take(rows * width, dtype);
        ReceiveTensor(*impl_->group, hidden, from, options_.timeout);
        message.hidden = hidden.view({rows, width});
      }
      return message;
    }
  } catch (const std::exception& e) {
    if (closing_) return absl::CancelledError("the link is closing");
    const std::string what = c10::GetExceptionString(e);
    if (what.find("Timed out") != std::string::npos) {
      return absl::UnavailableError(absl::StrCat(StageName(from, options_.size), ": no answer within ",
                                                 options_.timeout.count(), "ms (--stage-timeout)"));
    }
    return absl::UnavailableError(
        absl::StrCat(StageName(from, options_.size), ": connection lost: ", what));
  }
}

void StageLink::PinReceiveBuffers() {
  pinned_receives_ = true;
  for (auto& [peer, buffers] : impl_->buffers) buffers.hidden = HopBuffer(/*pinned=*/true);
}

void StageLink::SetKvBlocksInUseSource(std::function<int64_t()> source) {
  kv_blocks_source_ = std::move(source);
}

void StageLink::OnKvBlocksInUse(std::function<void(int64_t)> on_received) {
  on_kv_blocks_ = std::move(on_received);
}

void StageLink::StartHeartbeats(int to) {
  impl_->heartbeats.emplace_back([this, to] {
    const auto interval = options_.timeout / 3;
    std::unique_lock<std::mutex> stop_lock(impl_->stop_mutex);
    while (!impl_->stop_changed.wait_for(stop_lock, interval / 2, [&] { return impl_->stopping; })) {
      bool due = false;
      {
        std::lock_guard<std::mutex> lock(impl_->send_mutex);
        auto last = impl_->last_send.find(to);
        due = last == impl_->last_send.end() || Clock::now() - last->second >= interval;
      }
      if (!due) continue;
      StageMessage heartbeat;
      heartbeat.kind = StageMessageKind::kHeartbeat;
      if (!Send(to, heartbeat).ok()) return;  // the receiving side reports the loss
    }
  });
}

}  // namespace placer::runtime
