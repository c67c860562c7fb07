// Access control of a real placerd on loopback: bearer tokens (with SIGHUP reload), TLS and
// mTLS with certificates made here by the openssl CLI, bad PEM flags, and the request size cap.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "client/placer_client.h"
#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

using std::chrono::seconds;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A temporary directory holding a CA, a server certificate for 127.0.0.1 and localhost,
// and a client certificate, all made once for the whole suite.
class Pki {
 public:
  static const Pki& Get() {
    static const Pki* pki = new Pki();
    return *pki;
  }
  std::string dir;
  std::string Path(const std::string& name) const { return dir + "/" + name; }

 private:
  Pki() {
    char templ[] = "/tmp/placer-access-XXXXXX";
    dir = mkdtemp(templ);
    WriteFile(Path("server.ext"),
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
              "extendedKeyUsage=serverAuth\n");
    WriteFile(Path("client.ext"), "extendedKeyUsage=clientAuth\n");
    const std::string d = dir;
    const std::string script =
        "set -e; cd " + d + "; "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "  -subj /CN=placer-test-ca; "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
        "  -subj /CN=localhost; "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "  -out server.pem -days 2 -extfile server.ext; "
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
        "  -subj /CN=placer-test-client; "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "  -out client.pem -days 2 -extfile client.ext";
    const CommandResult made = RunCommand("sh -c '" + script + "'");
    if (made.exit_code != 0) ADD_FAILURE() << "openssl failed: " << made.output;
  }
};

client::PlacerClient ClientWith(const StartedDaemon& ports, client::ClientCredentials c) {
  client::ClientOptions options{ports.target(), seconds(5)};
  options.credentials = std::move(c);
  return client::PlacerClient(options);
}

client::ClientCredentials Token(const std::string& token) {
  client::ClientCredentials c;
  c.bearer_token = token;
  return c;
}

client::ClientCredentials Tls(bool with_client_cert) {
  const Pki& pki = Pki::Get();
  client::ClientCredentials c;
  c.tls = true;
  c.ca_pem = ReadFile(pki.Path("ca.pem"));
  if (with_client_cert) {
    c.client_cert_pem = ReadFile(pki.Path("client.pem"));
    c.client_key_pem = ReadFile(pki.Path("client.key"));
  }
  return c;
}

std::string Metrics(const StartedDaemon& ports) {
  return HttpGet(ports.metrics_port, "/metrics").value_or("");
}

TEST(AccessToken, PlacerRpcsNeedTheTokenHealthDoesNot) {
  const StartedDaemon ports = PickPorts();
  const std::string tokens = Pki::Get().Path("tokens-a");
  WriteFile(tokens, "# operators\n\n  first-secret-0123  \nsecond-secret-4567\n");
  DaemonProcess daemon(DaemonArgs(ports, {"--auth-token-file", tokens}));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();

  // Health needs no token.
  EXPECT_TRUE(ClientWith(ports, {}).CheckHealth().ok());

  auto missing = ClientWith(ports, {}).GetModelInfo();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnauthenticated) << missing.status();
  auto wrong = ClientWith(ports, Token("guess-987654")).GetModelInfo();
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong.status().message().find("guess-987654"), absl::string_view::npos);

  EXPECT_TRUE(ClientWith(ports, Token("first-secret-0123")).GetModelInfo().ok());
  EXPECT_TRUE(ClientWith(ports, Token("second-secret-4567")).GetModelInfo().ok());

  const std::string metrics = Metrics(ports);
  EXPECT_NE(metrics.find("placer_auth_failures_total{rpc=\"GetModelInfo\"} 2"), std::string::npos)
      << metrics;
  // Refused calls never reached the handler, which counts every call it finishes.
  EXPECT_NE(metrics.find("placer_requests_total{code=\"OK\",rpc=\"GetModelInfo\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("UNAUTHENTICATED"), std::string::npos) << metrics;

  const std::string log = daemon.Log();
  EXPECT_NE(log.find("refused GetModelInfo"), std::string::npos) << log;
  EXPECT_EQ(log.find("guess-987654"), std::string::npos) << log;
  EXPECT_EQ(log.find("first-secret"), std::string::npos) << log;
}

TEST(AccessToken, SighupReloadsTheFileAndKeepsOldTokensWhenItIsBad) {
  const StartedDaemon ports = PickPorts();
  const std::string tokens = Pki::Get().Path("tokens-b");
  WriteFile(tokens, "old-token-1111\n");
  DaemonProcess daemon(DaemonArgs(ports, {"--auth-token-file", tokens}));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
  ASSERT_TRUE(ClientWith(ports, Token("old-token-1111")).GetModelInfo().ok());

  WriteFile(tokens, "new-token-2222\n");
  daemon.Signal(SIGHUP);
  EXPECT_TRUE(WaitUntil([&] { return ClientWith(ports, Token("new-token-2222")).GetModelInfo().ok(); },
                        seconds(10)))
      << daemon.Log();
  EXPECT_EQ(ClientWith(ports, Token("old-token-1111")).GetModelInfo().status().code(),
            absl::StatusCode::kUnauthenticated);

  WriteFile(tokens, "# nothing left\n");
  daemon.Signal(SIGHUP);
  EXPECT_TRUE(WaitUntil([&] { return daemon.Log().find("keeping the previous tokens") !=
                                     std::string::npos; },
                        seconds(10)))
      << daemon.Log();
  EXPECT_TRUE(ClientWith(ports, Token("new-token-2222")).GetModelInfo().ok());
  EXPECT_TRUE(daemon.running());
}

TEST(AccessToken, AnEmptyTokenFileIsAnError) {
  const StartedDaemon ports = PickPorts();
  const std::string tokens = Pki::Get().Path("tokens-empty");
  WriteFile(tokens, "\n# none\n");
  DaemonProcess daemon(DaemonArgs(ports, {"--auth-token-file", tokens}));
  EXPECT_EQ(daemon.WaitExit(seconds(20)), 1);
  EXPECT_NE(daemon.Log().find("--auth-token-file: " + tokens), std::string::npos) << daemon.Log();
}

TEST(AccessTls, PlaintextClientsFailTlsClientsAndTheCliWork) {
  const Pki& pki = Pki::Get();
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(
      ports, {"--tls-cert", pki.Path("server.pem"), "--tls-key", pki.Path("server.key")}));
  ASSERT_TRUE(WaitUntil([&] { return ClientWith(ports, Tls(false)).CheckHealth().ok(); },
                        seconds(20)))
      << daemon.Log();
  EXPECT_FALSE(ClientWith(ports, {}).CheckHealth().ok());

  const std::string cli = std::string(PLACER_CLI_PATH) + " --target " + ports.target();
  // No model: health answers NOT_SERVING (exit 1), which proves the TLS call went through.
  const CommandResult with_ca = RunCommand(cli + " --tls-ca " + pki.Path("ca.pem") + " health");
  EXPECT_EQ(with_ca.exit_code, 1) << with_ca.output;
  EXPECT_EQ(with_ca.output, "NOT_SERVING\n");
  EXPECT_EQ(RunCommand(cli + " --timeout 2 health").exit_code, 2);
}

TEST(AccessTls, ClientCertificatesAreRequiredWithTlsClientCa) {
  const Pki& pki = Pki::Get();
  const StartedDaemon ports = PickPorts();
  const std::string tokens = pki.Path("tokens-c");
  WriteFile(tokens, "mtls-token-3333\n");
  DaemonProcess daemon(DaemonArgs(
      ports, {"--tls-cert", pki.Path("server.pem"), "--tls-key", pki.Path("server.key"),
              "--tls-client-ca", pki.Path("ca.pem"), "--auth-token-file", tokens}));
  ASSERT_TRUE(WaitUntil([&] { return ClientWith(ports, Tls(true)).CheckHealth().ok(); },
                        seconds(20)))
      << daemon.Log();
  EXPECT_FALSE(ClientWith(ports, Tls(false)).CheckHealth().ok());

  client::ClientCredentials both = Tls(true);
  both.bearer_token = "mtls-token-3333";
  EXPECT_TRUE(ClientWith(ports, both).GetModelInfo().ok());
  EXPECT_EQ(ClientWith(ports, Tls(true)).GetModelInfo().status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_NE(daemon.Log().find("CN=placer-test-client"), std::string::npos) << daemon.Log();

  const std::string cli = std::string(PLACER_CLI_PATH) + " --target " + ports.target() +
                          " --tls-ca " + pki.Path("ca.pem");
  EXPECT_EQ(RunCommand(cli + " --timeout 2 health").exit_code, 2);
  const CommandResult with_cert = RunCommand(cli + " --tls-cert " + pki.Path("client.pem") +
                                             " --tls-key " + pki.Path("client.key") +
                                             " --token-file " + tokens + " info");
  EXPECT_EQ(with_cert.exit_code, 0) << with_cert.output;
}

TEST(AccessTls, BadPemFilesExitOneNamingTheFlagAndFile) {
  const Pki& pki = Pki::Get();
  const std::string garbage = pki.Path("garbage.pem");
  WriteFile(garbage, "not a certificate\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", pki.Path("server.key")},
       "--tls-cert: /nonexistent/cert.pem"},
      {{"--tls-cert", garbage, "--tls-key", pki.Path("server.key")}, "--tls-cert: " + garbage},
      {{"--tls-cert", pki.Path("server.pem"), "--tls-key", garbage}, "--tls-key: " + garbage},
      {{"--tls-cert", pki.Path("server.pem"), "--tls-key", pki.Path("client.key")},
       "--tls-key: " + pki.Path("client.key")},
      {{"--tls-cert", pki.Path("server.pem"), "--tls-key", pki.Path("server.key"),
        "--tls-client-ca", garbage},
       "--tls-client-ca: " + garbage},
  };
  for (const auto& [flags, expected] : cases) {
    const StartedDaemon ports = PickPorts();
    DaemonProcess daemon(DaemonArgs(ports, flags));
    EXPECT_EQ(daemon.WaitExit(seconds(20)), 1) << expected;
    EXPECT_NE(daemon.Log().find(expected), std::string::npos) << daemon.Log();
  }
}

TEST(AccessLimits, RequestsAboveMaxRequestBytesGetResourceExhausted) {
  const StartedDaemon ports = PickPorts();
  DaemonProcess daemon(DaemonArgs(ports, {"--max-request-bytes", "1024"}));
  ASSERT_TRUE(WaitUntil([&] { return Answers(ports); }, seconds(20))) << daemon.Log();
  v1::ForwardRequest big;
  for (int i = 0; i < 1000; ++i) big.add_token_ids(100000 + i);
  EXPECT_EQ(ClientWith(ports, {}).Forward(big).status().code(),
            absl::StatusCode::kResourceExhausted);
  // A small one reaches the service (which has no model to run it).
  v1::ForwardRequest small;
  small.add_token_ids(1);
  EXPECT_EQ(ClientWith(ports, {}).Forward(small).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace placer::testing
