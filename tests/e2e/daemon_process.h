// Real processes and sockets for end-to-end tests: a placerd child on loopback ports, the
// `placer` CLI, and a plain HTTP GET for /metrics.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace placer::testing {

// A port nobody listens on right now, below the kernel's ephemeral range (bound and released),
// that no other test process on this machine is handed while this process lives.
int FreeLoopbackPort();

// Claims `port` for this process against every other process that claims ports this way, until
// this process exits: the claim's descriptor (keep it open), or -1 when another process holds it.
int ClaimPortAcrossProcesses(int port);

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

class DaemonProcess {
 public:
  // Starts placerd with `args`; its stdout and stderr go to a log file.
  explicit DaemonProcess(const std::vector<std::string>& args);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  void Signal(int signal_number) const;
  // The exit code, or nullopt if it did not exit in time (then it is killed).
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  bool running();
  std::string Log() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  bool exited_ = false;
};

// A daemon on free loopback ports, with metrics enabled.
struct StartedDaemon {
  int grpc_port;
  int metrics_port;
  std::string target() const { return "127.0.0.1:" + std::to_string(grpc_port); }
};
StartedDaemon PickPorts();
std::vector<std::string> DaemonArgs(const StartedDaemon& ports,
                                    const std::vector<std::string>& extra = {});

// True once the daemon answers a health check (a fresh channel each time, so gRPC's
// reconnect backoff after an early refusal does not slow the test down).
bool Answers(const StartedDaemon& ports);

// Waits until the daemon's health is SERVING (its model is loaded); false on timeout.
bool WaitServing(const StartedDaemon& ports, std::chrono::milliseconds timeout);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
CommandResult RunCommand(const std::string& command_line);

// Body of GET http://127.0.0.1:port/path, or nullopt if nothing answered with 200.
std::optional<std::string> HttpGet(int port, const std::string& path);

}  // namespace placer::testing
