// --dtype auto, placerd's default: a checkpoint is served in the dtype it stores (F16 as BF16
// without a real GPU), said in GetModelInfo and the start log, and a BF16 checkpoint binds
// without a copy: at ready its weights are mapped, not yet read, unless --warm-up has run its
// first forward pass before ready (timed in the log and a metric, the logits unchanged).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/exposition.h"

namespace placer::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class DtypeAuto : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("placer-dtype-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path Write(const std::string& name, const std::string& args) {
    const fs::path dir = root_ / name;
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          dir.string() + " --arch llama " + args);
    EXPECT_EQ(made.exit_code, 0) << made.output;
    return dir;
  }

  // ~64 MB of BF16 weights.
  fs::path WriteBig(const std::string& name, int seed) {
    return Write(name, "--layers 8 --hidden 512 --heads 8 --kv-heads 4 --intermediate 1408 "
                       "--vocab 8000 --dtype BF16 --seed " + std::to_string(seed));
  }

  static double SafetensorsBytes(const fs::path& dir) {
    double bytes = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".safetensors") bytes += static_cast<double>(entry.file_size());
    }
    return bytes;
  }

  // One sequence of 64 positions at most: the KV cache stays small next to the weights.
  static std::vector<std::string> ServeFlags(const fs::path& dir,
                                             const std::vector<std::string>& extra) {
    std::vector<std::string> flags = {"--model", dir.string(), "--max-seq-len", "64",
                                      "--max-batch-size", "1"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }

  fs::path root_;
};

TEST_F(DtypeAuto, ServesTheCheckpointsDtypeAndSaysSo) {
  struct Case {
    std::string stored, computed, log;
  };
  for (const Case& c : {Case{"F32", "F32", "compute dtype F32: the checkpoint's"},
                        Case{"BF16", "BF16", "compute dtype BF16: the checkpoint's"},
                        Case{"F16", "BF16", "compute dtype BF16: the checkpoint's F16, computed as "
                                            "BF16: no real GPU"}}) {
    SCOPED_TRACE(c.stored);
    const fs::path dir = Write(c.stored, "--layers 2 --hidden 64 --heads 4 --kv-heads 2 "
                                         "--intermediate 128 --vocab 300 --seed 3 --dtype " +
                                             c.stored);
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(ports, {"--model", dir.string(), "--max-seq-len", "64"}));
    ASSERT_TRUE(WaitServing(ports, seconds(30))) << daemon.Log();
    client::PlacerClient client({ports.target(), seconds(5)});
    auto info = client.GetModelInfo();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->dtype(), c.stored);
    EXPECT_EQ(info->compute_dtype(), c.computed);
    EXPECT_FALSE(info->has_quantization()) << info->quantization().DebugString();
    EXPECT_NE(daemon.Log().find(c.log), std::string::npos) << daemon.Log();
    v1::ForwardRequest forward;
    for (int token : {4, 8, 15}) forward.add_token_ids(token);
    auto logits = client.Forward(forward);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(logits->logits().data().size(), 300 * sizeof(float));
  }
}

// kB figures of one process's mappings, from /proc/PID/smaps: resident bytes of the mappings
// of files under `dir`, and anonymous resident bytes in all.
struct Residency {
  double mapped_checkpoint = 0;
  double anonymous = 0;
};

Residency ResidencyOf(pid_t pid, const fs::path& dir) {
  std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps");
  Residency residency;
  bool in_checkpoint = false;
  std::string line;
  while (std::getline(smaps, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {  // a mapping's header
      in_checkpoint = line.find(dir.string()) != std::string::npos;
      continue;
    }
    double kb = 0;
    fields >> kb;
    if (first == "Rss:" && in_checkpoint) residency.mapped_checkpoint += kb * 1024;
    if (first == "Anonymous:") residency.anonymous += kb * 1024;
  }
  return residency;
}

// BF16 weights served as they are are mapped and not read until used: at ready next to none of
// the checkpoint is resident (the 0.1x). Forced to F32 they are converted into anonymous
// memory twice their size.
TEST_F(DtypeAuto, ABf16CheckpointIsBoundWithoutACopy) {
  const fs::path dir = WriteBig("big", 4);
  const double bytes = SafetensorsBytes(dir);
  ASSERT_GT(bytes, 50.0 * (1 << 20));
  auto at_ready = [&](const std::vector<std::string>& extra) {
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(ports, ServeFlags(dir, extra)));
    EXPECT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
    return ResidencyOf(daemon.pid(), dir);
  };
  const Residency bf16 = at_ready({});
  const Residency f32 = at_ready({"--dtype", "F32"});
  EXPECT_LT(bf16.mapped_checkpoint, 0.1 * bytes)
      << "--dtype auto read its BF16 weights before any request";
  EXPECT_GT(f32.anonymous - bf16.anonymous, 1.5 * bytes)
      << "F32 converts the weights into memory of its own; auto should not: anonymous "
      << bf16.anonymous << " (auto) vs " << f32.anonymous << " (F32), weights " << bytes;
}

// --warm-up does a first call's work before ready: the weights read in from the mapping or
// re-laid out (AMX tiles, pair order) into memory of placerd's own, timed in the start log and
// placer_model_warm_up_seconds; the model's logits are those of a daemon without it.
TEST_F(DtypeAuto, WarmUpReadsTheWeightsBeforeReadyAndChangesNoLogit) {
  const fs::path dir = WriteBig("warm", 5);
  const double bytes = SafetensorsBytes(dir);
  struct AtReady {
    Residency residency;
    std::string log, logits;
    std::optional<double> warm_up_seconds, load_seconds;
  };
  auto at_ready = [&](const std::vector<std::string>& extra) {
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(ports, ServeFlags(dir, extra)));
    AtReady ready;
    EXPECT_TRUE(WaitServing(ports, seconds(60))) << daemon.Log();
    ready.residency = ResidencyOf(daemon.pid(), dir);
    ready.warm_up_seconds = ScrapeValue(ports.metrics_port, "placer_model_warm_up_seconds");
    ready.load_seconds = ScrapeValue(ports.metrics_port, "placer_model_load_seconds");
    client::PlacerClient client({ports.target(), seconds(30)});
    v1::ForwardRequest forward;
    for (int token : {4, 8, 15, 16}) forward.add_token_ids(token);
    auto logits = client.Forward(forward);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (logits.ok()) ready.logits = logits->logits().data();
    ready.log = daemon.Log();
    return ready;
  };
  const AtReady cold = at_ready({});
  const AtReady warm = at_ready({"--warm-up"});
  const double cold_held = cold.residency.mapped_checkpoint + cold.residency.anonymous;
  const double warm_held = warm.residency.mapped_checkpoint + warm.residency.anonymous;
  EXPECT_GT(warm_held - cold_held, 0.5 * bytes)
      << "--warm-up should have read or re-laid out the weights before ready: mapped "
      << warm.residency.mapped_checkpoint << " + anonymous " << warm.residency.anonymous
      << " against " << cold.residency.mapped_checkpoint << " + " << cold.residency.anonymous
      << " without it, weights " << bytes;
  EXPECT_NE(warm.log.find("--warm-up: one forward pass of one token in"), std::string::npos)
      << warm.log;
  EXPECT_EQ(cold.log.find("--warm-up"), std::string::npos) << cold.log;
  ASSERT_TRUE(warm.warm_up_seconds.has_value() && warm.load_seconds.has_value());
  EXPECT_GT(*warm.warm_up_seconds, 0);
  EXPECT_LE(*warm.warm_up_seconds, *warm.load_seconds);
  EXPECT_FALSE(cold.warm_up_seconds.has_value());
  ASSERT_FALSE(cold.logits.empty());
  EXPECT_EQ(warm.logits, cold.logits) << "a warmed-up model should give the same logits";
}

}  // namespace
}  // namespace placer::testing
