// KeepInRegister: stop the compiler from folding a vector load into every instruction that
// uses it.
#pragma once

namespace placer::model {

// In the few-row kernels each loaded input vector feeds T multiply-adds (one per weight row of
// the tile). GCC folds the load into each of them as a memory operand, so an 8-row tile of 2
// weight rows issued 2 + 16 loads per 16 FMAs instead of 2 + 8: on cores with two vector load
// ports the loads, not the FMAs, set the pace of prompt chunks (perf annotate of
// RowChunk512<8>, bench/analysis.md). An empty asm that may change the value makes the compiler
// hold it in a register once loaded. Nothing is emitted, and the arithmetic (and so every bit
// of the result) is unchanged.
template <typename Vector>
__attribute__((always_inline)) inline void KeepInRegister(Vector& value) {
  asm("" : "+v"(value));
}

}  // namespace placer::model
