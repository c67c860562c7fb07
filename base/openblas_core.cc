#include "base/openblas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace placer::base {

std::string OpenBlasCoreName() {
  using CoreNameFn = char* (*)();
  // Only OpenBLAS exports it; libtorch loads the BLAS as a global dependency.
  const auto core_name = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = core_name != nullptr ? core_name() : nullptr;
  return name != nullptr ? name : "";
}

int OpenBlasThreads() {
  using ThreadsFn = int (*)();
  // Looked up once; called each time, as openblas_set_num_threads may change the count.
  static const auto threads =
      reinterpret_cast<ThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return threads != nullptr ? threads() : 0;
}

CpuVectorUnits DetectCpuVectorUnits() {
  __builtin_cpu_init();
  CpuVectorUnits cpu;
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
  cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16");
  return cpu;
}

namespace {

// OpenBLAS's x86-64 kernel families with AVX2 + FMA sgemm kernels or wider (its names, as
// openblas_get_corename spells them).
bool HasAvx2Kernels(std::string_view core) {
  for (const char* name : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    if (core == name) return true;
  }
  return false;
}

}  // namespace

std::string BetterOpenBlasCoreType(std::string_view chosen, CpuVectorUnits cpu) {
  if (chosen.empty() || !cpu.avx2_fma || HasAvx2Kernels(chosen)) return "";
  if (cpu.avx512_bf16) return "Cooperlake";
  if (cpu.avx512) return "SkylakeX";
  return "Haswell";
}

void ReexecWithBetterOpenBlasCore(char** argv) {
  if (argv == nullptr || environ == nullptr || std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string chosen = OpenBlasCoreName();
  const std::string better = BetterOpenBlasCoreType(chosen, DetectCpuVectorUnits());
  if (better.empty()) return;
  std::vector<std::string> added = {"OPENBLAS_CORETYPE=" + better,
                                    std::string(kReplacedOpenBlasCoreVariable) + "=" + chosen};
  std::vector<char*> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.push_back(*entry);
  for (std::string& assignment : added) environment.push_back(assignment.data());
  environment.push_back(nullptr);
  execve("/proc/self/exe", argv, environment.data());
  // The exec failed (no /proc): run on with OpenBLAS's choice.
}

std::string DescribeOpenBlasCore() {
  std::string core = OpenBlasCoreName();
  if (core.empty()) return core;
  const char* replaced = std::getenv(kReplacedOpenBlasCoreVariable);
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (replaced != nullptr && forced != nullptr) {
    core += " (OPENBLAS_CORETYPE set by placer: OpenBLAS took this CPU for ";
    core += replaced;
    core += ")";
  } else if (forced != nullptr) {
    core += " (OPENBLAS_CORETYPE=";
    core += forced;
    core += ")";
  }
  return core;
}

}  // namespace placer::base
