#include "bench/daemon_ready.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "client/placer_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "base/status_macros.h"

namespace placer::bench {
namespace {

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
    }
    execv(raw[0], raw.data());
    _exit(127);
  }
  return pid;
}

// SIGTERM, then SIGKILL if it has not exited within 30 s; the exit status.
int Stop(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 3000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

// True once something accepts TCP connections at "host:port" (IPv4). Polled before the first
// RPC: a gRPC channel refused early backs off for seconds, which would blur the time to ready.
bool Accepting(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::atoi(target.c_str() + colon + 1)));
  const std::string host = target.substr(0, colon);
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &address.sin_addr) != 1) {
    return false;
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

// The load time placerd logs ("loaded DIR in 1.234s: ..."), -1 when absent.
double LoggedLoadSeconds(const std::string& log_path) {
  std::ifstream in(log_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string log = text.str();
  std::smatch match;
  if (std::regex_search(log, match, std::regex(R"(loaded .* in ([0-9.]+)s)"))) {
    return std::stod(match[1].str());
  }
  return -1;
}

void AddMemory(nlohmann::json& out, pid_t pid, const std::string& suffix) {
  const auto status = ProcStatusBytes(std::to_string(pid));
  out["peak_rss_bytes" + suffix] = StatusField(status, "VmHWM");
  out["rss_bytes" + suffix] = StatusField(status, "VmRSS");
  out["rss_anon_bytes" + suffix] = StatusField(status, "RssAnon");
  out["rss_file_bytes" + suffix] = StatusField(status, "RssFile");
}

}  // namespace

absl::StatusOr<nlohmann::json> MeasureDaemonReady(const ReadyArgs& args) {
  auto channel = grpc::CreateChannel(args.target, grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  auto placer = v1::Placer::NewStub(channel);
  bool listening = false;

  const Clock::time_point start = Clock::now();
  PLACER_ASSIGN_OR_RETURN(auto spawned, Spawn(args.argv, args.log_path));
  const pid_t pid = spawned;
  nlohmann::json out = {{"command", args.argv}};
  bool ready = false;
  while (!ready && Seconds(start, Clock::now()) < args.timeout_seconds) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return absl::InternalError(absl::StrCat("the daemon exited (status ", status,
                                              ") before it was ready; see ", args.log_path));
    }
    // Every 5 ms: finer polling takes CPU from the daemon starting on the same two cores.
    listening = listening || Accepting(args.target);
    if (!listening) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    context.set_wait_for_ready(true);
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status rpc = health->Check(&context, request, &response);
    ready = rpc.ok() && (args.until_listening ||
                         response.status() == grpc::health::v1::HealthCheckResponse::SERVING);
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!ready) {
    Stop(pid);
    return absl::DeadlineExceededError(absl::StrCat("the daemon was not ready within ",
                                                    args.timeout_seconds, " s; see ", args.log_path));
  }
  out["ready_seconds"] = Seconds(start, Clock::now());
  AddMemory(out, pid, "_at_ready");

  if (args.forward_tokens > 0) {
    v1::ForwardRequest request;
    for (int32_t id : PromptTokens(args.forward_tokens, args.vocab)) request.add_token_ids(id);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    v1::ForwardResponse response;
    const Clock::time_point call = Clock::now();
    const grpc::Status rpc = placer->Forward(&context, request, &response);
    if (!rpc.ok()) {
      Stop(pid);
      return absl::InternalError(absl::StrCat("Forward after ready failed: ", rpc.error_message()));
    }
    out["first_forward_seconds"] = Seconds(call, Clock::now());
    out["ready_plus_first_forward_seconds"] = Seconds(start, Clock::now());
    AddMemory(out, pid, "_after_forward");
  }
  out["exit_status"] = Stop(pid);
  out["logged_load_seconds"] = LoggedLoadSeconds(args.log_path);
  return out;
}

}  // namespace placer::bench
