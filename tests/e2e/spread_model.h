// A real checkpoint (placer-make-checkpoint's "tiny" Llama) in a temporary directory, and the
// placerd flags that spread it over two virtual GPUs, the CPU and disk, as a multi-GPU
// machine with offloading would. Removed with the object.
#pragma once

#include <string>
#include <vector>

namespace placer::testing {

class SpreadModel {
 public:
  // Writes the checkpoint; `name` keeps concurrent tests apart. Check ok() before use.
  explicit SpreadModel(const std::string& name);
  ~SpreadModel();
  SpreadModel(const SpreadModel&) = delete;
  SpreadModel& operator=(const SpreadModel&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

  // --model, --devices (cuda:0, cuda:1, cpu, disk), --offload-dir, --max-seq-len and
  // --max-batch-size 1 (devices of a few MiB hold the reserves of one sequence only).
  std::vector<std::string> DaemonFlags() const;

  // The devices every plan of this model uses, in plan order.
  static std::vector<std::string> Devices() { return {"cuda:0", "cuda:1", "cpu", "disk"}; }

 private:
  std::string root_, dir_, error_;
};

}  // namespace placer::testing
