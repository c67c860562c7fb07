// FreeLoopbackPort's promise across processes: ctest runs test processes side by side, and a
// port one of them holds for its daemon must not be handed to another before the daemon binds.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/e2e/daemon_process.h"

namespace placer::testing {
namespace {

// Tries to claim `port` from a forked child: 0 when the child got it, 1 when it was refused.
int ClaimInChild(int port) {
  const pid_t child = fork();
  if (child == 0) _exit(ClaimPortAcrossProcesses(port) >= 0 ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(FreeLoopbackPort, APortHandedOutHereCannotBeClaimedByAnotherProcess) {
  const int port = FreeLoopbackPort();
  EXPECT_EQ(ClaimInChild(port), 1) << "another process claimed port " << port;
}

TEST(FreeLoopbackPort, AClaimEndsWithTheProcessThatHeldIt) {
  // A child takes a port and exits; the claim must not outlive it (a crashed test would
  // otherwise keep ports from every later run).
  int pipe_ends[2];
  ASSERT_EQ(pipe(pipe_ends), 0);
  const pid_t child = fork();
  if (child == 0) {
    const int port = FreeLoopbackPort();
    _exit(write(pipe_ends[1], &port, sizeof(port)) == sizeof(port) ? 0 : 1);
  }
  int port = 0;
  ASSERT_EQ(read(pipe_ends[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  int status = 0;
  waitpid(child, &status, 0);
  close(pipe_ends[0]);
  close(pipe_ends[1]);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const int claim = ClaimPortAcrossProcesses(port);
  EXPECT_GE(claim, 0) << "port " << port << " is still claimed after its process exited";
  if (claim >= 0) close(claim);
}

}  // namespace
}  // namespace placer::testing
