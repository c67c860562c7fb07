// What the load tests (load_test.cc, drain_test.cc) share: reading a Generate stream to its
// end, a tally of what every client saw, and the fixture that writes the tiny checkpoint.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing::load {

namespace fs = std::filesystem;
namespace v1 = ::placer::v1;

// Reads a Generate stream to its end: the status, the messages received and the finish
// reason; the client cancels after `cancel_after` messages when that is not 0.
struct StreamEnd {
  grpc::Status status;
  int messages = 0;
  std::string finish_reason;
};
inline StreamEnd ReadStream(client::PlacerClient& client, grpc::ClientContext& context,
                     const v1::GenerateRequest& request, int cancel_after) {
  auto reader = client.placer_stub().Generate(&context, request);
  v1::GenerateResponse response;
  StreamEnd end;
  while (reader->Read(&response)) {
    ++end.messages;
    if (!response.finish_reason().empty()) end.finish_reason = response.finish_reason();
    if (end.messages == cancel_after) context.TryCancel();
  }
  end.status = reader->Finish();
  return end;
}

// What each client saw, by request kind and gRPC code.
class Tally {
 public:
  void Add(const std::string& kind, grpc::StatusCode code, const std::string& message,
           bool expected) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[kind + " " + std::to_string(code)];
    if (!expected && unexpected_.size() < 20) {
      unexpected_.push_back(kind + ": code " + std::to_string(code) + ": " + message);
    }
  }
  std::vector<std::string> unexpected() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return unexpected_;
  }
  std::string Unexpected() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const std::string& line : unexpected_) out += line + "\n";
    return out;
  }
  std::string Summary() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const auto& [key, count] : counts_) out += key + ": " + std::to_string(count) + "\n";
    return out;
  }
  int total() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int sum = 0;
    for (const auto& [key, count] : counts_) sum += count;
    return sum;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> counts_;
  std::vector<std::string> unexpected_;
};

class Load : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("placer-load-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_.string() + " --arch llama --preset tiny --seed 5");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

}  // namespace placer::testing::load
