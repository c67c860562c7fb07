// Why this exists: idle threads of the two thread pools under libtorch spin by default, and on
// a few shared cores that spinning takes the cores from the threads doing the work.
// - libgomp (ATen's OpenMP pool) spins between parallel regions: a decode step of the `small`
//   preset took 141-217 ms instead of 54-64 ms with OMP_WAIT_POLICY=passive.
// - OpenBLAS's own pthread workers (Debian's libopenblas0-pthread) spin for 2^28 cycles
//   (~0.1 s) after every BLAS call: after a prefill's sgemm they held the second core while
//   the decode step's few-row kernels needed it, and an 8-row product took 22 ms instead of
//   11 (bench/analysis.md). OPENBLAS_THREAD_TIMEOUT=4 makes them sleep at once.
// So placerd (and placer-bench-model) set both unless the user did.
//
// Both libraries read the environment once, in their ELF constructors, which run before
// main() and before any constructor of this executable; a setenv() in main() is silently
// ignored. Even a .preinit_array function (which runs before every library constructor)
// cannot setenv: libc's own initialiser runs after it and resets `environ` to the kernel's
// block. So this function, run from .preinit_array (libraries are loaded and relocated, but no
// constructor has run, libtorch's operator registration included), re-executes the binary
// once with the missing variables appended. The pid, argv and open files stay; the variables
// are then in /proc/<pid>/environ, and the second start finds them set and goes on.
// Opt out by setting a variable yourself (OMP_WAIT_POLICY=active, OPENBLAS_THREAD_TIMEOUT=28).
// GOMP_SPINCOUNT, when set, still wins inside libgomp.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

struct Default {
  const char* prefix;      // "NAME="
  const char* assignment;  // "NAME=value"
};
constexpr Default kDefaults[] = {
    {"OMP_WAIT_POLICY=", "OMP_WAIT_POLICY=passive"},
    {"OPENBLAS_THREAD_TIMEOUT=", "OPENBLAS_THREAD_TIMEOUT=4"},
};
constexpr size_t kDefaultCount = sizeof(kDefaults) / sizeof(kDefaults[0]);

bool IsSet(char** envp, const char* prefix) {
  for (char** entry = envp; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

void ReexecWithThreadWaitDefaults(int /*argc*/, char** argv, char** envp) {
  if (argv == nullptr || envp == nullptr) return;
  size_t count = 0;
  while (envp[count] != nullptr) ++count;
  auto** environment = static_cast<char**>(std::malloc((count + kDefaultCount + 1) * sizeof(char*)));
  if (environment == nullptr) return;
  std::memcpy(environment, envp, count * sizeof(char*));
  size_t added = 0;
  for (const Default& value : kDefaults) {
    if (!IsSet(envp, value.prefix)) environment[count + added++] = const_cast<char*>(value.assignment);
  }
  environment[count + added] = nullptr;
  if (added > 0) execve("/proc/self/exe", argv, environment);
  // Nothing to add, or the exec failed (no /proc): run on with the libraries' defaults.
  std::free(environment);
}

}  // namespace

// Functions in an executable's .preinit_array run before any shared library's constructor.
__attribute__((section(".preinit_array"), used)) static void (*const kThreadWaitDefaults)(
    int, char**, char**) = &ReexecWithThreadWaitDefaults;
