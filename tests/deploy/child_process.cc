#include "tests/deploy/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace placer::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv) {
  char log_template[] = "/tmp/placer-child-XXXXXX";
  const int log_fd = mkstemp(log_template);
  if (log_fd < 0) throw std::runtime_error("mkstemp failed");
  log_path_ = log_template;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
}

ChildProcess::~ChildProcess() {
  if (running()) {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (running()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  unlink(log_path_.c_str());
}

bool ChildProcess::running() {
  if (exited_) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == 0) return true;
  exited_ = true;
  return false;
}

std::string ChildProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace placer::testing
