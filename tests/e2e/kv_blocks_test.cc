// The paged KV cache seen from outside, through a real placerd: a stream takes blocks for its
// length and gives them back when it ends, is cancelled or passes its deadline; a request
// that finds too few free blocks waits in the queue although the batch has room; a full
// queue answers RESOURCE_EXHAUSTED at once. Blocks are read from the /metrics scrape.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

v1::GenerateRequest Prompt(uint32_t max_new_tokens) {
  v1::GenerateRequest request;
  for (int32_t id : {5, 6, 7}) request.add_prompt_token_ids(id);
  request.mutable_params()->set_max_new_tokens(max_new_tokens);
  request.mutable_params()->set_ignore_eos(true);
  return request;
}

// A stream whose caller decides when to read on and when to give up.
struct OpenStream {
  OpenStream(client::PlacerClient& client, const v1::GenerateRequest& request,
             std::chrono::milliseconds deadline) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    reader = client.placer_stub().Generate(&context, request);
  }
  grpc::Status Drain() {
    for (v1::GenerateResponse response; reader->Read(&response);) {
      tokens += response.token_ids_size();
    }
    return reader->Finish();
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  int tokens = 0;
};

class KvBlocksOverGrpc : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("placer-kv-blocks-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir_.string() + " --arch llama --preset tiny --max-positions 2048 --seed 4");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  void TearDown() override { fs::remove_all(dir_); }

  double Blocks(const char* state) const {
    return ScrapeValue(ports_.metrics_port, "placer_device_kv_cache_blocks",
                  {{"device", "cpu"}, {"state", state}})
        .value_or(-1);
  }

  fs::path dir_;
  StartedDaemon ports_ = PickPorts();
};

TEST_F(KvBlocksOverGrpc, StreamsTakeBlocksForTheirLengthAndGiveThemBack) {
  // 2048 positions shared by up to four sequences: 128 blocks of 16.
  DaemonProcess daemon(DaemonArgs(ports_, {"--model", dir_.string(), "--max-seq-len", "2048",
                                           "--max-batch-size", "4", "--max-batch-total-tokens",
                                           "2048", "--max-queue", "1", "--threads", "1"}));
  ASSERT_TRUE(WaitServing(ports_, seconds(60))) << daemon.Log();
  EXPECT_EQ(Blocks("used"), 0);
  EXPECT_EQ(Blocks("free"), 128);
  client::PlacerClient client({ports_.target(), seconds(10)});

  // 3 + 2000 positions: 126 blocks, held while it runs.
  OpenStream long_stream(client, Prompt(2000), seconds(60));
  v1::GenerateResponse first;
  ASSERT_TRUE(long_stream.reader->Read(&first)) << long_stream.reader->Finish().error_message();
  EXPECT_EQ(Blocks("used"), 126);
  EXPECT_EQ(Blocks("free"), 2);

  // 3 + 60 positions need 4 blocks: it waits in the queue although the batch has room.
  auto waiting = std::async(std::launch::async, [&] {
    OpenStream stream(client, Prompt(60), seconds(60));
    const grpc::Status status = stream.Drain();
    return std::make_pair(status, stream.tokens);
  });
  EXPECT_TRUE(WaitUntil(
      [&] { return ScrapeValue(ports_.metrics_port, "placer_queue_depth") == 1.0; }, seconds(10)))
      << "the short request should wait for blocks";
  EXPECT_EQ(ScrapeValue(ports_.metrics_port, "placer_running_sequences"), 1.0);

  // The queue (--max-queue 1) is full: refused at once.
  OpenStream refused(client, Prompt(4), seconds(10));
  const grpc::Status full = refused.Drain();
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
  EXPECT_NE(full.error_message().find("--max-queue 1"), std::string::npos) << full.error_message();

  // The long stream's client goes away: its blocks come back and the waiting one runs.
  long_stream.context.TryCancel();
  EXPECT_EQ(long_stream.Drain().error_code(), grpc::StatusCode::CANCELLED);
  const auto [status, tokens] = waiting.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, 60);
  EXPECT_TRUE(WaitUntil([&] { return Blocks("used") == 0 && Blocks("free") == 128; }, seconds(10)))
      << "used " << Blocks("used") << ", free " << Blocks("free");

  // Past its deadline a stream stops within a step and gives its blocks back.
  OpenStream late(client, Prompt(2000), milliseconds(300));
  EXPECT_EQ(late.Drain().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(late.tokens, 2000);
  EXPECT_TRUE(WaitUntil([&] { return Blocks("used") == 0 && Blocks("free") == 128; }, seconds(10)))
      << "used " << Blocks("used") << ", free " << Blocks("free");

  // Longer than --max-seq-len: refused before it takes anything, naming the limit.
  OpenStream too_long(client, Prompt(2046), seconds(10));
  const grpc::Status refused_long = too_long.Drain();
  EXPECT_EQ(refused_long.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused_long.error_message().find("2048 positions"), std::string::npos)
      << refused_long.error_message();
}

}  // namespace
}  // namespace placer::testing
