// placerd's command line: defaults, help, and one clear line for every bad flag, both from
// the parser and from the real binary (bad address, port already taken).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>

#include "server/flags.h"
#include "tests/e2e/daemon_process.h"

namespace placer::server {
namespace {

FlagParseOutcome Parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"placerd"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return ParseDaemonFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(DaemonFlags, DefaultsMatchTheDocumentation) {
  const FlagParseOutcome outcome = Parse({});
  ASSERT_TRUE(outcome.options.has_value()) << outcome.message;
  EXPECT_EQ(outcome.options->listen, "127.0.0.1:50051");
  EXPECT_EQ(outcome.options->metrics_listen, "127.0.0.1:9400");
  EXPECT_EQ(outcome.options->model_dir, "");
  EXPECT_EQ(outcome.options->log_format, "text");
  EXPECT_EQ(outcome.options->drain_timeout, std::chrono::seconds(30));
}

TEST(DaemonFlags, HelpListsEveryFlagWithItsDefault) {
  const FlagParseOutcome outcome = Parse({"--help"});
  EXPECT_FALSE(outcome.options.has_value());
  EXPECT_EQ(outcome.exit_code, 0);
  for (const char* flag : {"--listen", "--metrics-listen", "--model", "--log-format",
                           "--log-level", "--drain-timeout"}) {
    EXPECT_NE(outcome.message.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(outcome.message.find("127.0.0.1:50051"), std::string::npos);
  EXPECT_NE(outcome.message.find("30s"), std::string::npos);
}

TEST(DaemonFlags, ParsesValuesAndDurations) {
  const FlagParseOutcome outcome =
      Parse({"--listen", "[::1]:7000", "--metrics-listen", "", "--drain-timeout", "1500ms",
             "--log-format", "json", "--log-level", "debug"});
  ASSERT_TRUE(outcome.options.has_value()) << outcome.message;
  EXPECT_EQ(outcome.options->listen, "[::1]:7000");
  EXPECT_EQ(outcome.options->metrics_listen, "");
  EXPECT_EQ(outcome.options->drain_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(outcome.options->log_format, "json");
  EXPECT_EQ(ParseDuration("2m").value(), std::chrono::minutes(2));
  EXPECT_EQ(ParseDuration("5").value(), std::chrono::seconds(5));
}

struct BadFlagCase {
  std::vector<std::string> args;
  std::string mentioned;  // what the one-line error must name
};

class BadDaemonFlag : public ::testing::TestWithParam<BadFlagCase> {};

TEST_P(BadDaemonFlag, GivesOneClearLineAndExitCodeTwo) {
  const FlagParseOutcome outcome = Parse(GetParam().args);
  EXPECT_FALSE(outcome.options.has_value());
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_NE(outcome.message.find(GetParam().mentioned), std::string::npos) << outcome.message;
  EXPECT_EQ(outcome.message.find('\n'), std::string::npos) << outcome.message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadDaemonFlag,
    ::testing::Values(BadFlagCase{{"--no-such-flag"}, "--no-such-flag"},
                      BadFlagCase{{"--listen", "localhost"}, "--listen"},
                      BadFlagCase{{"--listen", "127.0.0.1:99999"}, "65535"},
                      BadFlagCase{{"--listen", ":50051"}, "no host"},
                      BadFlagCase{{"--listen", "::1:50051"}, "brackets"},
                      BadFlagCase{{"--metrics-listen", "127.0.0.1:http"}, "--metrics-listen"},
                      BadFlagCase{{"--drain-timeout", "soon"}, "--drain-timeout"},
                      BadFlagCase{{"--drain-timeout", "3days"}, "unknown unit"},
                      BadFlagCase{{"--log-format", "xml"}, "--log-format"},
                      BadFlagCase{{"--log-level", "loud"}, "--log-level"}),
    [](const ::testing::TestParamInfo<BadFlagCase>& info) {
      std::string name = std::to_string(info.index);
      for (const std::string& arg : info.param.args) {
        for (char c : arg) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      }
      return name;
    });

TEST(DaemonBinary, UnknownFlagExitsNonZeroWithOneLine) {
  const testing::CommandResult result =
      testing::RunCommand(std::string(PLACERD_PATH) + " --frobnicate");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--frobnicate"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find('\n'), result.output.size() - 1) << result.output;
}

// Holds a loopback port the way another server would.
class PortHolder {
 public:
  PortHolder() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(fd_, 1);
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~PortHolder() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_;
};

TEST(DaemonBinary, GrpcPortInUseIsAClearErrorNotACrash) {
  PortHolder taken;
  testing::DaemonProcess daemon({"--listen", "127.0.0.1:" + std::to_string(taken.port()),
                                 "--metrics-listen", ""});
  const std::optional<int> code = daemon.WaitExit(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value()) << "placerd kept running on a taken port";
  EXPECT_EQ(*code, 1);
  EXPECT_NE(daemon.Log().find("--listen: cannot listen on 127.0.0.1:" +
                              std::to_string(taken.port())),
            std::string::npos)
      << daemon.Log();
}

TEST(DaemonBinary, MetricsPortInUseIsAClearErrorNotACrash) {
  PortHolder taken;
  testing::DaemonProcess daemon(
      {"--listen", "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()), "--metrics-listen",
       "127.0.0.1:" + std::to_string(taken.port())});
  const std::optional<int> code = daemon.WaitExit(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value()) << "placerd kept running on a taken metrics port";
  EXPECT_EQ(*code, 1);
  EXPECT_NE(daemon.Log().find("--metrics-listen: cannot listen"), std::string::npos)
      << daemon.Log();
}

}  // namespace
}  // namespace placer::server
