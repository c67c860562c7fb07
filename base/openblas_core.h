// Which OpenBLAS kernels the process runs, and a way out when OpenBLAS does not know the CPU.
//
// Debian 12's OpenBLAS (0.3.21, built with DYNAMIC_ARCH) picks its kernels from a table of CPU
// models. A CPU newer than the table (Intel family 6 model 207, Emerald Rapids, with AVX-512,
// AVX512-BF16 and VNNI) falls through to "Prescott": SSE3 kernels, and a 128-row sgemm of the
// `small` preset took 4.2x as long as with the Cooperlake kernels the same library has
// (`placer-bench-model products`, bench/analysis.md). OpenBLAS reads OPENBLAS_CORETYPE once,
// in its constructor, so the only fix from inside is to start again with it set.
#pragma once

#include <string>
#include <string_view>

namespace placer::base {

// OpenBLAS's kernel family ("Haswell", "Zen", "SkylakeX", "Prescott", ...: its CPU detection,
// or OPENBLAS_CORETYPE), or "" when the process has no OpenBLAS.
std::string OpenBlasCoreName();

// The threads OpenBLAS runs a level-3 call on (openblas_get_num_threads: OPENBLAS_NUM_THREADS,
// OMP_NUM_THREADS or the cores it found), or 0 when the process has no OpenBLAS.
int OpenBlasThreads();

// The vector units that matter to sgemm kernels, from CPUID.
struct CpuVectorUnits {
  bool avx2_fma = false;
  bool avx512 = false;       // F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
  bool avx512_bf16 = false;  // what its Cooperlake kernels add (sbgemm)
};
CpuVectorUnits DetectCpuVectorUnits();

// The OPENBLAS_CORETYPE to run with instead of `chosen`, or "" to keep `chosen`. Only a core
// without AVX2 kernels on a CPU with AVX2 and FMA is replaced: a CPU OpenBLAS recognises keeps
// the kernels OpenBLAS tuned for it (Zen stays Zen), one it mistook gets the family its
// features say: Cooperlake (AVX-512 with BF16), SkylakeX (AVX-512), Haswell (AVX2 + FMA).
std::string BetterOpenBlasCoreType(std::string_view chosen, CpuVectorUnits cpu);

// Set by ReexecWithBetterOpenBlasCore to the core OpenBLAS had chosen, so the restarted
// process can say why OPENBLAS_CORETYPE is set.
inline constexpr char kReplacedOpenBlasCoreVariable[] = "PLACER_REPLACED_OPENBLAS_CORE";

// When OPENBLAS_CORETYPE is unset and BetterOpenBlasCoreType names a core, executes this binary
// again (same pid, argv, open files) with OPENBLAS_CORETYPE and kReplacedOpenBlasCoreVariable
// added; returns only when there is nothing to do or the exec failed. Call it at the top of
// main, before any thread starts. Set OPENBLAS_CORETYPE yourself to opt out.
void ReexecWithBetterOpenBlasCore(char** argv);

// One line for the start log: "Cooperlake", or "Cooperlake (OPENBLAS_CORETYPE set by placer:
// OpenBLAS took this CPU for Prescott)"; "" without OpenBLAS.
std::string DescribeOpenBlasCore();

}  // namespace placer::base
