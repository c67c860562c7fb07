// The leader's pipeline against a real peer (two StageLinks on loopback: TCPStore, Gloo): the
// answer of a carried step comes back in host memory that outlives the link's receive buffer,
// and an answer no step awaited (a peer answering twice) breaks the pipeline, naming the
// stage, instead of overwriting what a pass may be reading.
#include "runtime/stage_pipeline.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <future>
#include <thread>

namespace placer::runtime {
namespace {

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

TEST(StagePipelineTest, AnAnswerNoStepAwaitedBreaksThePipeline) {
  StageLinkOptions options;
  options.rendezvous = "127.0.0.1:" + std::to_string(FreePort());
  options.size = 2;
  options.timeout = std::chrono::seconds(5);
  options.rendezvous_timeout = std::chrono::seconds(30);
  std::future<absl::StatusOr<std::unique_ptr<StageLink>>> joining =
      std::async(std::launch::async, [options]() mutable {
        options.rank = 1;
        return StageLink::Connect(options);
      });
  absl::StatusOr<std::unique_ptr<StageLink>> leader_link = StageLink::Connect(options);
  absl::StatusOr<std::unique_ptr<StageLink>> worker = joining.get();
  ASSERT_TRUE(leader_link.ok()) << leader_link.status();
  ASSERT_TRUE(worker.ok()) << worker.status();

  std::promise<absl::Status> broken;
  auto pipeline = std::make_shared<StagePipeline>(
      std::shared_ptr<StageLink>(std::move(*leader_link)),
      [&](const absl::Status& status) { broken.set_value(status); });
  pipeline->Start();
  // The peer: answers the first step with its hidden states doubled, then answers it again.
  std::thread peer([&] {
    absl::StatusOr<StageMessage> step = (*worker)->Receive(0);
    ASSERT_TRUE(step.ok()) << step.status();
    StageMessage answer;
    answer.step = step->step;
    answer.hidden = step->hidden * 2;
    ASSERT_TRUE((*worker)->Send(0, answer).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE((*worker)->Send(0, answer).ok());
  });
  const at::Tensor hidden = at::arange(12, at::kFloat).view({3, 4});
  absl::StatusOr<at::Tensor> carried = pipeline->Carry({}, hidden);
  ASSERT_TRUE(carried.ok()) << carried.status();
  EXPECT_TRUE(at::equal(*carried, hidden * 2));
  const at::Tensor kept = carried->clone();

  std::future<absl::Status> reason = broken.get_future();
  ASSERT_EQ(reason.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const absl::Status status = reason.get();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("stage 1 (rank 1 of 2): answered step 1 while no step was awaited"),
            std::string::npos) << status;
  EXPECT_TRUE(at::equal(*carried, kept)) << "the unasked answer overwrote the one a pass holds";
  absl::StatusOr<at::Tensor> after = pipeline->Carry({}, hidden);
  EXPECT_FALSE(after.ok());
  peer.join();
  pipeline->Stop();
}

}  // namespace
}  // namespace placer::runtime
