// The placerd the Open Inference Protocol suites talk to: a tiny Llama checkpoint with its
// byte-level BPE tokenizer, in a directory named tiny-llama (the model's name in the
// protocol), with bearer tokens required. Each suite that derives from it gets its own daemon.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/oip_client.h"

namespace placer::testing {

class OipDaemon : public ::testing::Test {
 public:  // the suites' free helper functions use them too
  static constexpr char kModel[] = "tiny-llama";
  static constexpr char kToken[] = "oip-secret-0123";

  static void SetUpTestSuite() {
    namespace fs = std::filesystem;
    root_ = new fs::path(fs::temp_directory_path() / ("placer-oip-" + std::to_string(getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    const fs::path model = *root_ / kModel;
    const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                          model.string() + " --arch llama --preset tiny --seed 5");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    std::ofstream(*root_ / "tokens") << kToken << "\n";
    ports_ = new StartedDaemon(PickPorts());
    daemon_ = new DaemonProcess(DaemonArgs(
        *ports_, {"--model", model.string(), "--auth-token-file", (*root_ / "tokens").string()}));
    ASSERT_TRUE(WaitServing(*ports_, std::chrono::seconds(60))) << daemon_->Log();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete ports_;
    std::filesystem::remove_all(*root_);
    delete root_;
  }

  static OipClient Oip() { return OipClient(ports_->target(), kToken); }
  static client::PlacerClient Placer() {
    client::ClientOptions options(ports_->target(), std::chrono::seconds(60));
    options.credentials.bearer_token = kToken;
    return client::PlacerClient(options);
  }
  // placer.v1's Generate: the token ids and the text it streams.
  static std::pair<std::vector<int32_t>, std::string> Generate(const v1::GenerateRequest& request) {
    std::vector<int32_t> ids;
    std::string text;
    const absl::Status status = Placer().Generate(request, [&](const v1::GenerateResponse& r) {
      ids.insert(ids.end(), r.token_ids().begin(), r.token_ids().end());
      text += r.text();
    });
    EXPECT_TRUE(status.ok()) << status;
    return {ids, text};
  }

  static inline std::filesystem::path* root_ = nullptr;
  static inline StartedDaemon* ports_ = nullptr;
  static inline DaemonProcess* daemon_ = nullptr;
};

}  // namespace placer::testing
