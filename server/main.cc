// placerd: parse flags, start the daemon, reload tokens on SIGHUP, drain on SIGTERM or SIGINT.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include "model/causal_lm.h"

#include "server/daemon.h"
#include "server/flags.h"
#include "server/logging.h"

int main(int argc, char** argv) {
  // Blocked before any thread starts (gRPC, civetweb, OpenMP), so every thread inherits
  // the mask and only the sigwait below ever sees these signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const placer::server::FlagParseOutcome flags = placer::server::ParseDaemonFlags(argc, argv);
  if (!flags.options) {
    (flags.exit_code == 0 ? std::cout : std::cerr) << flags.message << std::endl;
    return flags.exit_code;
  }
  const placer::server::DaemonOptions& options = *flags.options;
  if (absl::Status status = placer::server::ConfigureLogging(options.log_format, options.log_level);
      !status.ok()) {
    std::cerr << "placerd: " << status.message() << std::endl;
    return 2;
  }

  placer::model::SetComputeThreads(
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency()));
  spdlog::info("compute: {} thread(s), BLAS {}", placer::model::ComputeThreads(),
               placer::model::BlasLibraryInUse());

  auto daemon = placer::server::Daemon::Start(options);
  if (!daemon.ok()) {
    spdlog::error("{}", std::string(daemon.status().message()));
    return 1;
  }

  if (absl::Status loaded = (*daemon)->LoadModel(); !loaded.ok()) {
    spdlog::error("cannot load model: {}", std::string(loaded.message()));
    return 1;
  }

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (absl::Status reloaded = (*daemon)->ReloadTokens(); reloaded.ok()) {
      spdlog::info("SIGHUP: reloaded {}", options.auth_token_file.empty()
                                              ? "nothing (no --auth-token-file)"
                                              : options.auth_token_file);
    } else {
      spdlog::error("SIGHUP: {}; keeping the previous tokens", std::string(reloaded.message()));
    }
  }
  spdlog::info("received {}; draining", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*daemon)->Drain();
  return 0;
}
