// A helper process for deployment tests (prometheus): started with an argv, its output in a
// log file, and always stopped when the object goes, even when an assertion ends the test.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace placer::testing {

class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // SIGTERM, then SIGKILL after 5 s
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running();
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  bool exited_ = false;
};

}  // namespace placer::testing
