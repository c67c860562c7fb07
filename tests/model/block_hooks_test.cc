// A hook added from outside (ModelRuntime::extra_hooks), with no change to the model's code,
// sees every block once per pass in execution order, with its inputs already on the block's
// execution device and its weights there (staged copies for offloaded blocks), and leaves
// the answer as it was. A hook that fails a block half way through a step shows that a
// failed step leaves the KV cache as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "runtime/block_hook.h"
#include "tests/model/made_checkpoint.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using placement::Device;

struct Seen {
  size_t block;
  std::string module;
  std::string execution_device;
  const void* input = nullptr;   // data of the first input on Enter
  const void* output = nullptr;  // data of the first output on Exit
  bool weights_staged = false;   // the weights handed over are not the bound ones
  bool exited = false;
};

class RecordingHook final : public runtime::BlockHook {
 public:
  void BeginPass() override { passes.emplace_back(); }
  void Enter(runtime::BlockCall& call) override {
    Seen seen{call.block, call.bound->spec.module, call.bound->execution_device.Name()};
    seen.input = call.activations.at(0)->data_ptr();
    seen.weights_staged = call.weights != &call.bound->weights;
    EXPECT_EQ(call.weights->size(), call.bound->spec.tensors.size()) << seen.module;
    passes.back().push_back(seen);
  }
  void Exit(runtime::BlockCall& call) override {
    ASSERT_FALSE(passes.back().empty());
    EXPECT_EQ(passes.back().back().block, call.block) << "Exit pairs with the last Enter";
    passes.back().back().output = call.activations.at(0)->data_ptr();
    passes.back().back().exited = true;
  }
  std::vector<std::vector<Seen>> passes;
};

class BlockHooks : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-hooks-", getpid(), "-", GetParam());
    fs::remove_all(dir_);
    const std::string args = GetParam() == "gpt2"
                                 ? "--arch gpt2 --layers 4 --hidden 64 --heads 4 --vocab 300"
                                 : "--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 "
                                   "--intermediate 96 --vocab 300 --attention-bias --mlp-bias";
    auto checkpoint = MakeAndOpenCheckpoint(dir_.string(), absl::StrCat(args, " --seed 21"));
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Embedding on cuda:0, layers on cuda:0, cuda:1, cpu (staged onto cuda:0) and disk (staged),
  // the rest on cuda:1: every kind of hop.
  runtime::RuntimePlan SpreadPlan() const {
    const bool gpt2 = GetParam() == "gpt2";
    const std::string layer = gpt2 ? "transformer.h." : "model.layers.";
    runtime::RuntimePlan plan;
    plan.device_map = {{gpt2 ? "transformer.wte" : "model.embed_tokens", Device::Cuda(0)},
                       {layer + "0", Device::Cuda(0)},
                       {layer + "1", Device::Cuda(1)},
                       {layer + "2", Device::Cpu()},
                       {layer + "3", Device::Disk()},
                       {gpt2 ? "transformer.ln_f" : "model.norm", Device::Cuda(1)},
                       {"lm_head", Device::Cuda(1)}};
    if (gpt2) plan.device_map.push_back({"transformer.wpe", Device::Cuda(0)});
    plan.execution_device = Device::Cuda(0);
    plan.virtual_gpus = true;
    plan.offload_dir = (dir_ / "offload").string();
    return plan;
  }

  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
};

TEST_P(BlockHooks, AnAddedHookSeesEveryBlockInOrderOnItsExecutionDevice) {
  const std::vector<int32_t> prompt = {1, 17, 250, 5, 99, 42};
  auto plain = LoadCausalLm(checkpoint_, ModelRuntime{SpreadPlan(), nullptr});
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto want = (*plain)->Forward(prompt, /*all_positions=*/true);
  ASSERT_TRUE(want.ok()) << want.status();

  auto hook = std::make_shared<RecordingHook>();
  ModelRuntime runtime{SpreadPlan(), nullptr};
  runtime.extra_hooks.push_back(hook);
  auto model = LoadCausalLm(checkpoint_, runtime);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int pass = 0; pass < 2; ++pass) {
    auto got = (*model)->Forward(prompt, /*all_positions=*/true);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->values, want->values) << "a hook that only looks changes nothing";
  }

  ASSERT_EQ(hook->passes.size(), 2u);
  const bool gpt2 = GetParam() == "gpt2";
  const std::string layer = gpt2 ? "transformer.h." : "model.layers.";
  std::vector<std::string> modules = {gpt2 ? "transformer.wte" : "model.embed_tokens"};
  if (gpt2) modules.push_back("transformer.wpe");
  for (int i = 0; i < 4; ++i) modules.push_back(layer + std::to_string(i));
  modules.push_back(gpt2 ? "transformer.ln_f" : "model.norm");
  modules.push_back("lm_head");
  const size_t first_layer = gpt2 ? 2 : 1;
  for (const std::vector<Seen>& pass : hook->passes) {
    ASSERT_EQ(pass.size(), modules.size());
    for (size_t b = 0; b < pass.size(); ++b) {
      const Seen& seen = pass[b];
      EXPECT_EQ(seen.block, b);
      EXPECT_EQ(seen.module, modules[b]);
      EXPECT_TRUE(seen.exited) << seen.module;
      // Offloaded layers run on the execution device with staged weights; the rest where
      // their weights are.
      const bool offloaded = seen.module == layer + "2" || seen.module == layer + "3";
      EXPECT_EQ(seen.weights_staged, offloaded) << seen.module;
      // GPT-2's tied lm_head reads wte, so it runs where wte is.
      const bool tied_head = gpt2 && seen.module == "lm_head";
      const std::string device =
          !tied_head && (b == first_layer + 1 || b >= first_layer + 4) ? "cuda:1" : "cuda:0";
      EXPECT_EQ(seen.execution_device, device) << seen.module;
      if (b == 0) continue;
      // The input is the previous block's output, moved (a copy: virtual GPUs are host
      // memory) exactly when the execution device changed, before this hook saw it.
      const bool moved = pass[b - 1].execution_device != seen.execution_device;
      EXPECT_EQ(seen.input != pass[b - 1].output, moved) << seen.module;
    }
  }
}

// Fails the block `fail_at` once when armed, after the blocks before it ran (and wrote their
// keys and values): a device error in the middle of a step.
class FailingHook final : public runtime::BlockHook {
 public:
  explicit FailingHook(size_t fail_at) : fail_at_(fail_at) {}
  void Enter(runtime::BlockCall& call) override {
    if (armed && call.block == fail_at_) {
      armed = false;
      TORCH_CHECK(false, "injected failure in ", call.bound->spec.module);
    }
  }
  bool armed = false;

 private:
  size_t fail_at_;
};

// A sliding-window model keeps a ring of KV blocks; a prompt chunk longer than the ring's
// spare room (held positions - window) overwrites positions the step reads. When the step fails half way, the ring must
// be as it was, or the retry (the engine retries each request of a failed batch alone) reads
// keys the failed attempt wrote.
TEST(FailedSteps, AFailedStepLeavesTheRingCacheAsItWasForTheRetry) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("placer-failed-step-", getpid());
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
  auto checkpoint = loader::Checkpoint::Open(dir.string());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto failing = std::make_shared<FailingHook>(/*fail_at=*/3);  // layer 2, after layers 0 and 1
  ModelRuntime runtime{runtime::RuntimePlan::AllOnCpu(), nullptr};
  runtime.extra_hooks.push_back(failing);
  auto model = LoadCausalLm(*checkpoint, runtime);
  auto reference = LoadCausalLm(*checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(reference.ok()) << reference.status();

  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back((i * 41 + 3) % 2000);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 20);
  // Positions 20..31 land on the slots of 4..15: of them 13..15 are in the window of the
  // chunk's first query (13..20), and with 4 layers of window 8 the last row sees them all.
  const std::vector<int32_t> chunk(tokens.begin() + 20, tokens.begin() + 32);
  auto sequence = (*model)->NewSequence(40);
  auto reference_sequence = (*reference)->NewSequence(40);
  ASSERT_TRUE(sequence.ok() && reference_sequence.ok());
  ASSERT_TRUE((*model)->Extend(**sequence, prompt).ok());
  ASSERT_TRUE((*reference)->Extend(**reference_sequence, prompt).ok());

  failing->armed = true;
  auto failed = (*model)->Extend(**sequence, chunk);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("injected failure in model.layers.2"),
            std::string::npos)
      << failed.status();
  EXPECT_EQ((*sequence)->length(), 20) << "a failed step commits nothing";

  auto retried = (*model)->Extend(**sequence, chunk);
  auto want = (*reference)->Extend(**reference_sequence, chunk);
  ASSERT_TRUE(retried.ok()) << retried.status();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(retried->values, want->values) << "the retry saw keys the failed step overwrote";
  // And the sequence goes on as if nothing had happened.
  auto next = (*model)->Extend(**sequence, {tokens[32]});
  auto next_want = (*reference)->Extend(**reference_sequence, {tokens[32]});
  ASSERT_TRUE(next.ok() && next_want.ok());
  EXPECT_EQ(next->values, next_want->values);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Architectures, BlockHooks, ::testing::Values("llama", "gpt2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace placer::model
