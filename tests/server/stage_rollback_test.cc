// A step the leader fails after the other stages ran it is rolled back on every stage, not
// only on the leader: its own lm_head fails, a hook fails while the pass ends, or reading the
// logits fails after the pass ended. In a sliding-window model the KV cache is a ring, and a
// prompt chunk overwrites positions the retry reads. Two ranks of a real group (TCPStore
// rendezvous, Gloo on loopback) in one process, each loading its share.
#include <gtest/gtest.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "model/stage_worker.h"
#include "runtime/stage_pipeline.h"
#include "server/stage_group.h"
#include "tests/e2e/daemon_process.h"

namespace placer::server {
namespace {

namespace fs = std::filesystem;

// How the leader fails one step after the pipeline carried it to the worker.
enum class Failure {
  kLmHead,       // its lm_head throws (a device error)
  kEndingPass,   // a hook throws while the pass ends (inside BlockRunner::Pass::Finish)
  kAfterFinish,  // the logits cannot be read after the pass ended (converting them fails)
};

class FailingHook final : public runtime::BlockHook {
 public:
  void Enter(runtime::BlockCall& call) override {
    if (armed == Failure::kLmHead && call.bound->spec.module == "lm_head") {
      armed.reset();
      TORCH_CHECK(false, "injected failure in lm_head");
    }
  }
  void EndPass(at::Tensor* output) override {
    if (output == nullptr || !armed) return;
    const Failure failure = *armed;
    if (failure == Failure::kEndingPass) {
      armed.reset();
      TORCH_CHECK(false, "injected failure ending the pass");
    }
    if (failure == Failure::kAfterFinish) {
      armed.reset();
      *output = output->flatten();  // no longer [rows, vocab]: reading the logits throws
    }
  }
  std::optional<Failure> armed;
};

float WorstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

class StageRollback : public ::testing::TestWithParam<Failure> {};

TEST_P(StageRollback, AStepTheLeaderFailsIsRolledBackOnTheWorkersRingCaches) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("placer-stage-rollback-", getpid());
  fs::remove_all(dir);
  ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir.string(),
                                     " --arch mistral --preset tiny --seed 23 > /dev/null")
                            .c_str()),
            0);
  {
    nlohmann::json config;
    std::ifstream(dir / "config.json") >> config;
    config["sliding_window"] = 8;  // every layer: a ring of one 16-position block
    std::ofstream(dir / "config.json") << config.dump(2);
  }
  placement::PlacementOptions placement;
  placement.devices = "cpu=2GiB";
  placement.max_seq_len = 64;
  placement.max_batch_size = 2;
  const std::string rendezvous = absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort());
  auto options = [&](int rank) {
    return StageOptions{2, rank, rendezvous, "127.0.0.1", std::chrono::seconds(5),
                        std::chrono::seconds(30)};
  };
  absl::StatusOr<StageAssignment> worker = absl::UnknownError("not joined");
  std::thread joining([&] { worker = JoinStageGroup(options(1), dir.string(), placement); });
  absl::StatusOr<StageAssignment> leader = JoinStageGroup(options(0), dir.string(), placement);
  joining.join();
  ASSERT_TRUE(leader.ok()) << leader.status();
  ASSERT_TRUE(worker.ok()) << worker.status();
  // The worker runs the last decoder layers, after the leader's first ones.
  ASSERT_GE(worker->share.first_layer, 1);
  ASSERT_EQ(worker->share.end_layer, 4);

  auto checkpoint = loader::Checkpoint::Open(dir.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::Status broken;
  auto pipeline = std::make_shared<runtime::StagePipeline>(
      leader->link, [&](const absl::Status& status) { broken = status; });
  auto failing = std::make_shared<FailingHook>();
  auto leader_model = model::LoadPlacedModel(
      *checkpoint, leader->plan, nullptr,
      {std::make_shared<runtime::PipelineHook>(pipeline, BoundaryBlock(leader->share)), failing});
  auto worker_model = model::LoadPlacedModel(*checkpoint, worker->plan);
  auto reference = model::LoadCausalLm(*checkpoint);
  ASSERT_TRUE(leader_model.ok()) << leader_model.status();
  ASSERT_TRUE(worker_model.ok()) << worker_model.status();
  ASSERT_TRUE(reference.ok()) << reference.status();
  pipeline->Start();
  absl::Status served;
  std::thread serving([&] { served = model::ServeStageSteps(**worker_model, *worker->link); });

  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back((i * 41 + 3) % 2000);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 20);
  // Positions 20..31 land on the slots of 4..15: 13..15 are in the window of the chunk's
  // first query, on every layer, the worker's two included.
  const std::vector<int32_t> chunk(tokens.begin() + 20, tokens.begin() + 32);
  auto sequence = (*leader_model)->NewSequence(40);
  auto reference_sequence = (*reference)->NewSequence(40);
  ASSERT_TRUE(sequence.ok() && reference_sequence.ok());
  auto first = (*leader_model)->Extend(**sequence, prompt);
  auto first_want = (*reference)->Extend(**reference_sequence, prompt);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first_want.ok()) << first_want.status();
  EXPECT_LE(WorstDifference(first->values, first_want->values), 1e-5f);

  failing->armed = GetParam();
  auto failed = (*leader_model)->Extend(**sequence, chunk);
  ASSERT_FALSE(failed.ok());
  const char* why = GetParam() == Failure::kLmHead       ? "injected failure in lm_head"
                    : GetParam() == Failure::kEndingPass ? "injected failure ending the pass"
                                                         : "Dimension out of range";
  EXPECT_NE(failed.status().message().find(why), std::string::npos) << failed.status();
  EXPECT_FALSE(failing->armed) << "the failure was injected";
  EXPECT_EQ((*sequence)->length(), 20) << "a failed step commits nothing";

  auto retried = (*leader_model)->Extend(**sequence, chunk);
  auto want = (*reference)->Extend(**reference_sequence, chunk);
  ASSERT_TRUE(retried.ok()) << retried.status();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_LE(WorstDifference(retried->values, want->values), 1e-5f)
      << "the retry saw keys the failed step overwrote on the worker";
  auto next = (*leader_model)->Extend(**sequence, {tokens[32]});
  auto next_want = (*reference)->Extend(**reference_sequence, {tokens[32]});
  ASSERT_TRUE(next.ok() && next_want.ok());
  EXPECT_LE(WorstDifference(next->values, next_want->values), 1e-5f);
  EXPECT_TRUE(broken.ok()) << "a failed step is not a broken pipeline: " << broken;

  // The leader goes: the worker finds its previous stage gone and returns.
  leader_model->reset();
  pipeline.reset();
  leader->link.reset();
  serving.join();
  EXPECT_TRUE(absl::IsUnavailable(served) || absl::IsCancelled(served)) << served;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Failures, StageRollback,
                         ::testing::Values(Failure::kLmHead, Failure::kEndingPass,
                                         Failure::kAfterFinish),
                         [](const ::testing::TestParamInfo<Failure>& info) {
                           return info.param == Failure::kLmHead       ? "LmHead"
                                  : info.param == Failure::kEndingPass ? "EndingThePass"
                                                                       : "AfterThePassEnded";
                         });

}  // namespace
}  // namespace placer::server
