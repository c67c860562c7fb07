// The generation engine (continuous batching) with a real model and real threads: a request's
// greedy output is the same alone and inside a batch; the queue is bounded; requests wait for
// KV-cache blocks; cancellation, deadlines and drains give the blocks back.
#include "model/generation_engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "runtime/block_hook.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using Clock = GenerationEngine::Clock;
using model::FinishReason;

class Scheduling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / absl::StrCat("placer-engine-", getpid()));
    fs::remove_all(*dir_);
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir_->string(),
                                       " --arch llama --layers 2 --hidden 64 --heads 4 "
                                       "--kv-heads 2 --intermediate 128 --vocab 500 --seed 21 "
                                       "> /dev/null")
                              .c_str()),
              0);
    auto checkpoint = loader::Checkpoint::Open(dir_->string());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    accounting_ = new std::shared_ptr<runtime::RuntimeAccounting>(
        std::make_shared<runtime::RuntimeAccounting>(std::vector<std::string>{"cpu"}));
    auto model = model::LoadCausalLm(*checkpoint, {runtime::RuntimePlan::AllOnCpu(), *accounting_});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new std::shared_ptr<const model::CausalLm>(*std::move(model));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete model_;
    delete accounting_;
    delete dir_;
  }

  static model::GenerationRequest Request(std::vector<int32_t> prompt, uint32_t max_new_tokens) {
    model::GenerationRequest request;
    request.prompt = std::move(prompt);
    request.max_new_tokens = max_new_tokens;
    return request;
  }

  struct Outcome {
    absl::StatusOr<FinishReason> finish;
    std::vector<int32_t> tokens;
  };
  static Outcome Run(GenerationEngine& engine, const model::GenerationRequest& request,
                     Clock::duration timeout = std::chrono::seconds(60), int cancel_after = -1) {
    Outcome outcome{FinishReason::kLength, {}};
    outcome.finish = engine.Generate(
        request, Clock::now() + timeout, nullptr, [&](const model::SampledToken& token) {
          outcome.tokens.push_back(token.id);
          return static_cast<int>(outcome.tokens.size()) != cancel_after ? TokenVerdict::kContinue
                                                                        : TokenVerdict::kCancel;
        });
    return outcome;
  }

  static uint64_t KvBlocksUsed(const runtime::RuntimeAccounting& accounting) {
    return accounting.KvBlocks("cpu").first;
  }
  static uint64_t KvBlocksUsed() { return KvBlocksUsed(**accounting_); }
  // Every sequence gave its blocks back to the pool (the engine frees them after its step).
  static bool KvCacheReturns(const runtime::RuntimeAccounting& accounting) {
    for (int i = 0; i < 500 && KvBlocksUsed(accounting) != 0; ++i) usleep(10000);
    return KvBlocksUsed(accounting) == 0;
  }
  static bool KvCacheReturns() { return KvCacheReturns(**accounting_); }

  static fs::path* dir_;
  static std::shared_ptr<const model::CausalLm>* model_;
  static std::shared_ptr<runtime::RuntimeAccounting>* accounting_;
};

fs::path* Scheduling::dir_ = nullptr;
std::shared_ptr<const model::CausalLm>* Scheduling::model_ = nullptr;
std::shared_ptr<runtime::RuntimeAccounting>* Scheduling::accounting_ = nullptr;

TEST_F(Scheduling, GreedyOutputAloneEqualsItsOutputInABatchOfEight) {
  std::vector<model::GenerationRequest> requests;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 3 + 5 * i; ++t) prompt.push_back((i * 37 + t * 11) % 500);
    model::GenerationRequest request = Request(prompt, 40 + 4 * i);
    if (i % 3 == 2) {  // sampled requests share the batch with the greedy ones
      request.sampling.temperature = 0.8f;
      request.sampling.top_k = 20;
      request.sampling.seed = 100 + i;
    }
    requests.push_back(request);
  }
  std::vector<std::vector<int32_t>> alone;
  {
    GenerationEngine engine(*model_, {});
    for (const auto& request : requests) {
      Outcome outcome = Run(engine, request);
      ASSERT_TRUE(outcome.finish.ok()) << outcome.finish.status();
      alone.push_back(outcome.tokens);
    }
  }
  std::atomic<int> largest_step{0};
  GenerationEngine engine(*model_, {8, 16, 64}, [&](int sequences, const EngineFigures&) {
    int seen = largest_step.load();
    while (sequences > seen && !largest_step.compare_exchange_weak(seen, sequences)) {
    }
  });
  std::vector<std::future<Outcome>> together;
  for (size_t i = 0; i < requests.size(); ++i) {
    together.push_back(std::async(std::launch::async, [&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2 * i));  // staggered arrivals
      return Run(engine, requests[i]);
    }));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Outcome outcome = together[i].get();
    ASSERT_TRUE(outcome.finish.ok()) << outcome.finish.status();
    EXPECT_EQ(outcome.tokens, alone[i]) << "request " << i;
  }
  EXPECT_GT(largest_step.load(), 1) << "requests never shared a forward pass";
  EXPECT_TRUE(KvCacheReturns());
}

// --max-queue 0: nothing waits, but a request with a free batch slot runs.
TEST_F(Scheduling, NoQueueStillServesRequestsTheBatchHasRoomFor) {
  GenerationEngine engine(*model_, {2, 64, 0});
  Outcome alone = Run(engine, Request({1, 2, 3}, 3));
  ASSERT_TRUE(alone.finish.ok()) << alone.finish.status();
  EXPECT_EQ(alone.tokens.size(), 3u);
}

TEST_F(Scheduling, AFullQueueIsRefusedAtOnceAndCancellationFreesTheCache) {
  GenerationEngine engine(*model_, {1, 64, 1});
  std::promise<void> first_token;
  std::atomic<bool> stop_first{false};
  auto first = std::async(std::launch::async, [&] {
    bool told = false;
    return engine.Generate(Request({1, 2, 3}, 400), Clock::now() + std::chrono::seconds(60),
                              [&] { return stop_first.load(); },
                              [&](const model::SampledToken&) {
                                if (!told) first_token.set_value();
                                told = true;
                                return TokenVerdict::kContinue;
                              });
  });
  first_token.get_future().wait();
  EXPECT_GT(KvBlocksUsed(), 0u);
  auto second = std::async(std::launch::async, [&] { return Run(engine, Request({4, 5}, 3)); });
  while (engine.Figures().queued < 1) usleep(1000);
  Outcome third = Run(engine, Request({6}, 3));
  EXPECT_EQ(third.finish.status().code(), absl::StatusCode::kResourceExhausted)
      << third.finish.status();
  EXPECT_NE(third.finish.status().message().find("--max-queue 1"), std::string::npos);

  stop_first = true;  // the client goes away: its slot and cache are given back
  auto cancelled = first.get();
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, FinishReason::kCancelled);
  Outcome served = second.get();
  ASSERT_TRUE(served.finish.ok()) << served.finish.status();
  EXPECT_EQ(served.tokens.size(), 3u);
  EXPECT_TRUE(KvCacheReturns());
}

// A stream stopped between steps (its client left just after the engine reported a step) is
// dropped at the top of the next loop, with nothing left to run: the observer must still hear
// that nothing runs, or the running gauge keeps counting a stream that is gone.
TEST_F(Scheduling, TheObserverHearsTheLastStreamLeaveBetweenSteps) {
  std::mutex heard_mutex;
  EngineFigures heard;
  std::atomic<bool> stepped{false};
  GenerationEngine engine(*model_, {1, 64, 1}, [&](int step_sequences, const EngineFigures& after) {
    std::lock_guard<std::mutex> lock(heard_mutex);
    heard = after;
    if (step_sequences > 0) stepped = true;
  });
  auto finish = engine.Generate(Request({1, 2, 3}, 400), Clock::now() + std::chrono::seconds(60),
                                [&] { return stepped.load(); },
                                [](const model::SampledToken&) { return TokenVerdict::kContinue; });
  ASSERT_TRUE(finish.ok()) << finish.status();
  EXPECT_EQ(*finish, FinishReason::kCancelled);
  const auto heard_idle = [&] {
    std::lock_guard<std::mutex> lock(heard_mutex);
    return heard.running == 0 && heard.queued == 0;
  };
  for (int i = 0; i < 500 && !heard_idle(); ++i) usleep(10000);
  EXPECT_TRUE(heard_idle()) << "the observer last heard " << heard.running << " running";
  EXPECT_TRUE(KvCacheReturns());
}

TEST_F(Scheduling, DeadlinesAreHonouredWhileQueuedAndWhileRunning) {
  GenerationEngine engine(*model_, {1, 64, 4});
  std::atomic<bool> stop_blocker{false};
  auto blocker = std::async(std::launch::async, [&] {
    return engine.Generate(Request({1, 2}, 2000), Clock::now() + std::chrono::seconds(60),
                              [&] { return stop_blocker.load(); },
                              [](const model::SampledToken&) { return TokenVerdict::kContinue; });
  });
  while (engine.Figures().running < 1) usleep(1000);
  Outcome queued = Run(engine, Request({3}, 5), std::chrono::milliseconds(100));
  EXPECT_EQ(queued.finish.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(queued.finish.status().message().find("queue"), std::string::npos)
      << queued.finish.status();
  EXPECT_EQ(engine.Figures().queued, 0) << "an expired request leaves the queue";
  stop_blocker = true;
  ASSERT_TRUE(blocker.get().ok());

  Outcome running = Run(engine, Request({3}, 2000), std::chrono::milliseconds(100));
  EXPECT_EQ(running.finish.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(running.finish.status().message().find("while generating"), std::string::npos)
      << running.finish.status();
  EXPECT_TRUE(KvCacheReturns());
}

TEST_F(Scheduling, RequestsWaitForFreeKvBlocksAndStillGiveTheirOutputAlone) {
  // A pool for two sequences of 64 positions: 8 blocks of 16. Each request below spans 40
  // positions (3 blocks), so only two fit at once although the batch admits eight.
  auto checkpoint = loader::Checkpoint::Open(dir_->string());
  ASSERT_TRUE(checkpoint.ok());
  auto accounting =
      std::make_shared<runtime::RuntimeAccounting>(std::vector<std::string>{"cpu"});
  auto small_pool = model::LoadCausalLm(
      *checkpoint, {runtime::RuntimePlan::AllOnCpu(), accounting, /*max_sequence_length=*/64,
                    /*kv_cache_blocks=*/8});
  ASSERT_TRUE(small_pool.ok()) << small_pool.status();
  EXPECT_EQ(accounting->KvBlocks("cpu"), std::make_pair(uint64_t{0}, uint64_t{8}));
  // 2 layers x keys and values x 2 kv heads x 16 dims x 128 positions x 4 bytes, held once.
  EXPECT_EQ(accounting->Used("cpu", runtime::MemoryKind::kKvCache), 2u * 2 * 2 * 16 * 128 * 4);

  std::vector<model::GenerationRequest> requests;
  std::vector<std::vector<int32_t>> alone;
  {
    GenerationEngine reference(*model_, {});
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> prompt;
      for (int t = 0; t < 8 + 3 * i; ++t) prompt.push_back((i * 53 + t * 7) % 500);
      requests.push_back(Request(prompt, static_cast<uint32_t>(40 - prompt.size())));
      Outcome outcome = Run(reference, requests.back());
      ASSERT_TRUE(outcome.finish.ok()) << outcome.finish.status();
      alone.push_back(outcome.tokens);
    }
  }
  std::atomic<int> most_running{0}, most_queued{0};
  GenerationEngine engine(
      std::shared_ptr<const model::CausalLm>(*std::move(small_pool)), {8, 64, 16},
      [&](int, const EngineFigures& after) {
        most_running = std::max(most_running.load(), after.running);
        most_queued = std::max(most_queued.load(), after.queued);
      });
  std::vector<std::future<Outcome>> together;
  for (const auto& request : requests) {
    together.push_back(std::async(std::launch::async, [&] { return Run(engine, request); }));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Outcome outcome = together[i].get();
    ASSERT_TRUE(outcome.finish.ok()) << "request " << i << ": " << outcome.finish.status();
    EXPECT_EQ(outcome.tokens, alone[i]) << "request " << i;
  }
  EXPECT_EQ(most_running.load(), 2) << "the pool holds two such sequences at once";
  EXPECT_GT(most_queued.load(), 0) << "the others waited in the queue for blocks";
  EXPECT_TRUE(KvCacheReturns(*accounting));
  EXPECT_EQ(accounting->KvBlocks("cpu"), std::make_pair(uint64_t{0}, uint64_t{8}));

  // Longer than the served length: refused before queueing, naming the limit.
  Outcome too_long = Run(engine, Request({1, 2, 3, 4, 5}, 60));
  EXPECT_EQ(too_long.finish.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.finish.status().message().find("64 positions"), std::string::npos)
      << too_long.finish.status();
}

TEST_F(Scheduling, BadRequestsAreRefusedBeforeQueueingNamingTheField) {
  GenerationEngine engine(*model_, {});
  model::GenerationRequest request = Request({1}, 5);
  request.sampling.top_p = 0;
  EXPECT_NE(Run(engine, request).finish.status().message().find("params.top_p"),
            std::string::npos);
  Outcome too_long = Run(engine, Request({1}, 1 << 20));
  EXPECT_NE(too_long.finish.status().message().find("params.max_new_tokens"), std::string::npos);
  model::GenerationRequest stops = Request({1, 2}, 50);
  Outcome free_run = Run(engine, stops);
  ASSERT_TRUE(free_run.finish.ok());
  ASSERT_GE(free_run.tokens.size(), 3u);
  stops.stop_token_ids = {free_run.tokens[2]};
  Outcome stopped = Run(engine, stops);
  ASSERT_TRUE(stopped.finish.ok());
  EXPECT_EQ(*stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + 2));
}

// Holds the first pass until a second request is queued, then fails block 3 of the first
// pass that carries `fail_rows` rows (the two requests' first shared step).
class SharedStepFailure final : public runtime::BlockHook {
 public:
  SharedStepFailure(int64_t fail_rows, std::function<bool()> second_queued)
      : fail_rows_(fail_rows), second_queued_(std::move(second_queued)) {}
  void Enter(runtime::BlockCall& call) override {
    if (call.block == 0) {
      rows_ = call.activations.at(0)->size(0);
      while (!held_ && !second_queued_()) usleep(1000);
      held_ = true;
    }
    if (call.block == 3 && rows_ == fail_rows_ && !fired) {
      fired = true;
      TORCH_CHECK(false, "injected failure of a shared step");
    }
  }
  std::atomic<bool> fired{false};

 private:
  const int64_t fail_rows_;
  const std::function<bool()> second_queued_;
  bool held_ = false;
  int64_t rows_ = 0;
};

TEST_F(Scheduling, AFailedSharedStepIsRetriedPerRequestAndBothFinishAsAlone) {
  const model::GenerationRequest first = Request({11, 12, 13, 14, 15}, 6);
  const model::GenerationRequest second = Request({21, 22, 23, 24, 25}, 6);
  std::vector<std::vector<int32_t>> alone;
  {
    GenerationEngine reference(*model_, {});
    for (const auto& request : {first, second}) alone.push_back(Run(reference, request).tokens);
  }
  auto checkpoint = loader::Checkpoint::Open(dir_->string());
  ASSERT_TRUE(checkpoint.ok());
  std::atomic<GenerationEngine*> engine_of_hook{nullptr};
  // Step 1: the first prompt alone (5 rows); step 2: its decode row and the second prompt.
  auto failure = std::make_shared<SharedStepFailure>(
      6, [&] {
        GenerationEngine* engine = engine_of_hook.load();
        return engine != nullptr && engine->Figures().queued == 1;
      });
  ModelRuntime runtime{runtime::RuntimePlan::AllOnCpu(), nullptr};
  runtime.extra_hooks.push_back(failure);
  auto failing_model = LoadCausalLm(*checkpoint, runtime);
  ASSERT_TRUE(failing_model.ok()) << failing_model.status();
  GenerationEngine engine(std::shared_ptr<const CausalLm>(*std::move(failing_model)), {2, 64, 4});
  engine_of_hook.store(&engine);
  auto first_run = std::async(std::launch::async, [&] { return Run(engine, first); });
  while (engine.Figures().running < 1) usleep(1000);
  Outcome second_run = Run(engine, second);
  Outcome first_outcome = first_run.get();
  EXPECT_TRUE(failure->fired) << "the two requests never shared a step";
  ASSERT_TRUE(first_outcome.finish.ok()) << first_outcome.finish.status();
  ASSERT_TRUE(second_run.finish.ok()) << second_run.finish.status();
  EXPECT_EQ(first_outcome.tokens, alone[0]);
  EXPECT_EQ(second_run.tokens, alone[1]);
}

}  // namespace
}  // namespace placer::model
