// placerd: parse flags, start the daemon, reload tokens on SIGHUP, drain on SIGTERM or SIGINT
// (or, while the model is still loading, stop and exit).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "base/malloc_reuse.h"
#include "base/openblas_core.h"
#include "model/causal_lm.h"

#include "server/daemon.h"
#include "server/flags.h"
#include "server/logging.h"
#include "server/stage_worker_process.h"

namespace {

pthread_t main_thread;

// Threads that libraries start before main (OpenBLAS's workers) do not block the signals, and
// the kernel may hand a process's signal to one of them whenever the main thread is not in
// sigwait (say, while the loading thread runs): their default action would kill placerd. On
// such a thread this passes the signal on to the main thread, where it waits for sigwait.
void ForwardToMainThread(int signal_number) { pthread_kill(main_thread, signal_number); }

}  // namespace

int main(int argc, char** argv) {
  placer::base::ReexecWithBetterOpenBlasCore(argv);
  placer::base::KeepFreedMemoryForReuse();
  main_thread = pthread_self();
  struct sigaction forward {};
  forward.sa_handler = ForwardToMainThread;
  sigemptyset(&forward.sa_mask);
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    sigaction(signal_number, &forward, nullptr);
  }
  // Blocked before any thread of ours starts (gRPC, civetweb, OpenMP), so every such thread
  // inherits the mask and only the sigwait below ever sees these signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  sigaddset(&stop_signals, SIGUSR1);  // from the loading thread: the load is over
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
  const std::string blas_core = placer::base::DescribeOpenBlasCore();
  spdlog::info("compute: {} thread(s), BLAS {}{}{}", placer::model::ComputeThreads(),
               placer::model::BlasLibraryInUse(), blas_core.empty() ? "" : ", OpenBLAS core ",
               blas_core);

  if (options.stages.enabled() && options.stages.rank > 0) {
    // A worker stage: nothing to drain (the leader holds the streams); SIGTERM ends it.
    std::atomic<int> exit_code{-1};
    std::thread worker([&] {
      exit_code = placer::server::RunStageWorker(options);
      pthread_kill(main_thread, SIGUSR1);
    });
    int signal_number = 0;
    while (sigwait(&stop_signals, &signal_number) == 0) {
      if (signal_number == SIGHUP) continue;
      if (signal_number == SIGUSR1 && exit_code.load() < 0) continue;
      break;
    }
    spdlog::default_logger()->flush();
    std::_Exit(signal_number == SIGUSR1 ? exit_code.load() : 0);
  }

  auto daemon = placer::server::Daemon::Start(options);
  if (!daemon.ok()) {
    spdlog::error("{}", std::string(daemon.status().message()));
    return 1;
  }

  // The model loads on its own thread while this one takes the signals, so that SIGTERM
  // during the load stops it and exits at once (nothing is served yet, nothing to drain)
  // instead of waiting for the load to end. SIGUSR1 says the load is over.
  std::atomic<bool> loading{true};
  absl::Status load_status;
  std::thread loader([&] {
    load_status = (*daemon)->LoadModel();
    loading = false;
    pthread_kill(main_thread, SIGUSR1);
  });
  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0) {
    if (signal_number == SIGHUP) {
      if (absl::Status reloaded = (*daemon)->ReloadTokens(); reloaded.ok()) {
        spdlog::info("SIGHUP: reloaded {}", options.auth_token_file.empty()
                                                ? "nothing (no --auth-token-file)"
                                                : options.auth_token_file);
      } else {
        spdlog::error("SIGHUP: {}; keeping the previous tokens", std::string(reloaded.message()));
      }
      continue;
    }
    if (signal_number == SIGUSR1) {
      loader.join();
      if (!load_status.ok()) {
        spdlog::error("cannot load model: {}", std::string(load_status.message()));
        return 1;
      }
      continue;
    }
    if (loading.load()) {
      spdlog::warn("received {} while loading the model: stopping the load and exiting",
                   signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
      spdlog::default_logger()->flush();
      std::_Exit(0);
    }
    break;
  }
  if (loader.joinable()) loader.join();  // the load ended just before the stop signal
  spdlog::info("received {}; draining", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*daemon)->Drain();
  return 0;
}
