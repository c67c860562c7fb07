// Why this exists: libgomp's default wait policy spins between parallel regions. On a few
// shared cores, with gRPC and engine threads beside the OpenMP team, that spinning takes the
// cores from the threads doing the work: a decode step of the `small` preset took 141-217 ms
// instead of 54-64 ms with OMP_WAIT_POLICY=passive (bench/analysis.md). So placerd (and
// placer-bench-model) default to passive unless the user set OMP_WAIT_POLICY.
//
// libgomp reads the environment once, in its ELF constructor, which runs before main() and
// before any constructor of this executable; a setenv() in main() is silently ignored. Even a
// .preinit_array function (which runs before every library constructor) cannot setenv: libc's
// own initialiser runs after it and resets `environ` to the kernel's block. So this function,
// run from .preinit_array (libraries are loaded and relocated, but no constructor has run,
// libtorch's operator registration included), re-executes the binary once with
// OMP_WAIT_POLICY=passive appended. The pid, argv and open files stay; the variable is then
// in /proc/<pid>/environ, and the second start finds it set and goes on.
// Opt out with OMP_WAIT_POLICY=active. GOMP_SPINCOUNT, when set, still wins inside libgomp.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

constexpr char kWaitPolicyPrefix[] = "OMP_WAIT_POLICY=";
constexpr char kPassiveWait[] = "OMP_WAIT_POLICY=passive";

bool HasWaitPolicy(char** envp) {
  for (char** entry = envp; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, kWaitPolicyPrefix, sizeof(kWaitPolicyPrefix) - 1) == 0) return true;
  }
  return false;
}

void ReexecWithPassiveOmpWait(int /*argc*/, char** argv, char** envp) {
  if (argv == nullptr || envp == nullptr || HasWaitPolicy(envp)) return;
  size_t count = 0;
  while (envp[count] != nullptr) ++count;
  auto** environment = static_cast<char**>(std::malloc((count + 2) * sizeof(char*)));
  if (environment == nullptr) return;
  std::memcpy(environment, envp, count * sizeof(char*));
  environment[count] = const_cast<char*>(kPassiveWait);
  environment[count + 1] = nullptr;
  execve("/proc/self/exe", argv, environment);
  // Only reached when the exec failed (no /proc): run on with libgomp's default wait.
  std::free(environment);
}

}  // namespace

// Functions in an executable's .preinit_array run before any shared library's constructor.
__attribute__((section(".preinit_array"), used)) static void (*const kOmpWaitPolicyDefault)(
    int, char**, char**) = &ReexecWithPassiveOmpWait;
