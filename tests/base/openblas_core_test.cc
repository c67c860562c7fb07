// BetterOpenBlasCoreType: which OpenBLAS choices are replaced, and by what. The process side
// (placerd restarting with OPENBLAS_CORETYPE) is tested in tests/e2e/daemon_lifecycle_test.cc.
#include "base/openblas_core.h"

#include <gtest/gtest.h>

namespace placer::base {
namespace {

constexpr CpuVectorUnits kAvx2{true, false, false};
constexpr CpuVectorUnits kAvx512{true, true, false};
constexpr CpuVectorUnits kAvx512Bf16{true, true, true};
constexpr CpuVectorUnits kSse{false, false, false};

TEST(BetterOpenBlasCoreType, AMistakenCpuGetsTheFamilyOfItsVectorUnits) {
  // Debian 12's OpenBLAS on an Emerald Rapids (AVX-512 with BF16): Prescott.
  EXPECT_EQ(BetterOpenBlasCoreType("Prescott", kAvx512Bf16), "Cooperlake");
  EXPECT_EQ(BetterOpenBlasCoreType("Prescott", kAvx512), "SkylakeX");
  EXPECT_EQ(BetterOpenBlasCoreType("Nehalem", kAvx2), "Haswell");
  EXPECT_EQ(BetterOpenBlasCoreType("Sandybridge", kAvx512), "SkylakeX");
  EXPECT_EQ(BetterOpenBlasCoreType("Core2", kAvx2), "Haswell");
}

TEST(BetterOpenBlasCoreType, ACoreWithAvx2KernelsIsKept) {
  for (const char* core : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(BetterOpenBlasCoreType(core, kAvx512Bf16), "") << core;
    EXPECT_EQ(BetterOpenBlasCoreType(core, kAvx2), "") << core;
  }
}

TEST(BetterOpenBlasCoreType, NothingChangesWithoutOpenBlasOrWithoutAvx2) {
  EXPECT_EQ(BetterOpenBlasCoreType("", kAvx512Bf16), "") << "no OpenBLAS in the process";
  EXPECT_EQ(BetterOpenBlasCoreType("Prescott", kSse), "") << "Prescott is right for this CPU";
  EXPECT_EQ(BetterOpenBlasCoreType("Nehalem", kSse), "");
}

TEST(DetectCpuVectorUnits, WiderUnitsImplyTheNarrowerOnes) {
  const CpuVectorUnits cpu = DetectCpuVectorUnits();
  EXPECT_TRUE(!cpu.avx512_bf16 || cpu.avx512);
  EXPECT_TRUE(!cpu.avx512 || cpu.avx2_fma);
}

}  // namespace
}  // namespace placer::base
