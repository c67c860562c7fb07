// What every AMX kernel of placer shares: whether this process may use the tiles, and the one
// tile configuration they all run with.
//
// Linux hands a process the AMX tile data (8 KiB of state per thread) only after it asks
// (arch_prctl ARCH_REQ_XCOMP_PERM); until then the first tile instruction faults. Asking is a
// property of the process, so it is done once, here, for every kernel.
#pragma once

namespace placer::model {

// The CPU has AMX-TILE and AMX-BF16 and Linux granted this process the tile data (asked once,
// on the first call). False on every other CPU, and where the kernel refuses.
bool AmxTilesUsable();

// Loads palette 1 with all 8 tiles at 16 rows of 64 bytes: C tiles of 16 x 16 float32, A and B
// tiles of 16 rows of 32 BF16 values. Requires AmxTilesUsable. The configuration is per thread:
// each kernel call configures on the thread it runs on and releases before it returns.
void ConfigureSquareTiles();

// Returns the tiles to their initial state, so a context switch saves none of their 8 KiB.
void ReleaseTiles();

}  // namespace placer::model
