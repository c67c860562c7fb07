#include "tests/e2e/spread_model.h"

#include <unistd.h>

#include <filesystem>

#include "tests/e2e/daemon_process.h"

namespace placer::testing {

namespace fs = std::filesystem;

SpreadModel::SpreadModel(const std::string& name) {
  root_ = (fs::temp_directory_path() /
           ("placer-spread-" + name + "-" + std::to_string(getpid())))
              .string();
  fs::remove_all(root_);
  fs::create_directories(root_);
  dir_ = root_ + "/model";
  const CommandResult made = RunCommand(std::string(PLACER_MAKE_CHECKPOINT_PATH) + " --out " +
                                        dir_ + " --arch llama --preset tiny --seed 5");
  if (made.exit_code != 0) error_ = "placer-make-checkpoint failed: " + made.output;
}

SpreadModel::~SpreadModel() { fs::remove_all(root_); }

std::vector<std::string> SpreadModel::DaemonFlags() const {
  // Sized so that every device holds weights (as `placer plan` shows): the embeddings on
  // cuda:0, layer 0 and the final norm on cuda:1, layers 1-3 on the CPU, lm_head on disk.
  return {"--model", dir_,
          "--devices", "cuda:0=4.5MiB,cuda:1=1.5MiB,cpu=3MiB,disk=1GiB",
          "--offload-dir", root_ + "/offload",
          "--max-seq-len", "64", "--max-batch-size", "1"};
}

}  // namespace placer::testing
