#include "tests/e2e/daemon_process.h"

#include "client/placer_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace placer::testing {

namespace {

// True when nothing on this machine holds `port` on loopback right now.
bool CanBindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (what outgoing connections are given).
int EphemeralRangeStart() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return range >> low && low > 11000 ? low : 32768;
}

}  // namespace

// The claim is an exclusive lock on /tmp/placer-test-ports/PORT whose descriptor stays open: the
// kernel drops it when the process exits, so a crashed test leaves nothing stale. Close-on-exec,
// so that a daemon started from here does not keep the claim alive after its test is gone.
int ClaimPortAcrossProcesses(int port) {
  static const char* kClaims = "/tmp/placer-test-ports";
  mkdir(kClaims, 0777);
  const std::string path = std::string(kClaims) + "/" + std::to_string(port);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Ports come from below the ephemeral range: a port the kernel hands out as ephemeral can be
// handed out again at once, to any process's outgoing connection (the gRPC clients of tests
// running beside this one), between our check and the daemon's bind; one did, and a stage's
// metrics server could not listen. Below the range only another test's choice can collide,
// and each port is claimed across processes (ClaimPortAcrossProcesses) before it is
// checked: a stage daemon once could not listen on its port while other tests ran beside it.
int FreeLoopbackPort() {
  static std::mutex mutex;
  static std::set<int> handed_out;
  static std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  const std::lock_guard<std::mutex> lock(mutex);
  std::uniform_int_distribution<int> below_ephemeral(10000, EphemeralRangeStart() - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = below_ephemeral(random);
    if (handed_out.count(port) != 0) continue;
    const int claim = ClaimPortAcrossProcesses(port);
    if (claim < 0) continue;
    if (CanBindLoopback(port)) {
      handed_out.insert(port);
      return port;  // `claim` stays open on purpose: closing it would release the port
    }
    close(claim);
  }
  throw std::runtime_error(
      "no free loopback port below the ephemeral range that /tmp/placer-test-ports could claim");
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

DaemonProcess::DaemonProcess(const std::vector<std::string>& args) {
  char log_template[] = "/tmp/placerd-test-XXXXXX";
  const int log_fd = mkstemp(log_template);
  if (log_fd < 0) throw std::runtime_error("mkstemp failed");
  log_path_ = log_template;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(PLACERD_PATH));
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(PLACERD_PATH, argv.data());
    _exit(127);
  }
  close(log_fd);
}

DaemonProcess::~DaemonProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(log_path_.c_str());
}

void DaemonProcess::Signal(int signal_number) const { kill(pid_, signal_number); }

bool DaemonProcess::running() {
  if (exited_) return false;
  return waitpid(pid_, nullptr, WNOHANG) == 0;
}

std::optional<int> DaemonProcess::WaitExit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  exited_ = true;
  return std::nullopt;
}

std::string DaemonProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

StartedDaemon PickPorts() { return StartedDaemon{FreeLoopbackPort(), FreeLoopbackPort()}; }

std::vector<std::string> DaemonArgs(const StartedDaemon& ports,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "--listen", "127.0.0.1:" + std::to_string(ports.grpc_port),
      "--metrics-listen", "127.0.0.1:" + std::to_string(ports.metrics_port)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool Answers(const StartedDaemon& ports) {
  client::PlacerClient client({ports.target(), std::chrono::seconds(2)});
  return client.CheckHealth().ok();
}

bool WaitServing(const StartedDaemon& ports, std::chrono::milliseconds timeout) {
  return WaitUntil(
      [&] {
        auto health = client::PlacerClient({ports.target(), std::chrono::seconds(2)}).CheckHealth();
        return health.ok() && *health == client::Health::kServing;
      },
      timeout);
}

CommandResult RunCommand(const std::string& command_line) {
  CommandResult result;
  FILE* pipe = popen((command_line + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t count = 0;
  while ((count = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, count);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::optional<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string response;
  char buffer[8192];
  ssize_t count = 0;
  while ((count = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, count);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") == std::string::npos ||
      body == std::string::npos) {
    return std::nullopt;
  }
  return response.substr(body + 4);
}

}  // namespace placer::testing
