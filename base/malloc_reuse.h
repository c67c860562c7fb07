// KeepFreedMemoryForReuse: glibc malloc settings for a process that runs the same forward
// passes over and over (placerd, placer-bench-model).
//
// By default glibc serves blocks past a sliding threshold (128 KiB, raised as such blocks are
// freed) with fresh mmap()s and returns free heap tops to the kernel past twice that. A
// prompt's activations (64 rows of 768-5632 floats: 0.2-1.4 MiB each) then came from pages
// the kernel hands out again on every pass, and on a VM where a page fault is expensive that
// was ~2 % of a prefill's samples under `perf`. Kept instead: blocks up to 32 MiB come from the
// heap, and up to 1 GiB of freed heap stays mapped for the next pass; weights, the KV pool and
// other long-lived buffers past 32 MiB are still their own mappings, returned when freed.
// Measured in process, small int4 prefill of 64 tokens (bench/analysis.md): glibc's defaults
// 27.1-29.9 ms against these settings (as GLIBC_TUNABLES) 25.1-27.4, four alternating rounds;
// against a fixed 128 KiB threshold 26.0-28.9 and 25.5-28.4, three rounds.
#pragma once

namespace placer::base {

// Sets M_MMAP_THRESHOLD to 32 MiB and M_TRIM_THRESHOLD to 1 GiB unless the user set either
// through MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES (theirs win).
// Call early in main(), before the threads that allocate start.
void KeepFreedMemoryForReuse();

}  // namespace placer::base
