// Zero-filled CPU tensors whose memory the kernel may back with 2 MiB pages.
//
// Weights that decode streams through on every step (packed quantized weights, weights converted
// to the compute dtype at load) are read once per token from end to end: with 4 KiB pages each
// step walks a TLB entry per 4 KiB, and on a ~1.1B int4 model that cost ~10 % of a decode step
// on the machines we measured (bench/analysis.md, "Huge pages for weights"). Linux backs anonymous
// memory with transparent huge pages only where the process asks (`madvise(MADV_HUGEPAGE)`) when
// /sys/kernel/mm/transparent_hugepage/enabled is `madvise`, Debian's default.
#pragma once

#include <ATen/ATen.h>

namespace placer::loader {

// A contiguous, zero-filled tensor of `sizes` and `dtype` on the CPU. Buffers of at least 2 MiB
// are anonymous mappings that start on a 2 MiB boundary, advised MADV_HUGEPAGE (a hint: where
// the kernel has no huge pages or THP is off they are ordinary pages, and nothing else
// changes); smaller ones come from ATen's allocator, as at::zeros would give them. The memory is
// returned when the last tensor sharing it is freed.
at::Tensor HugePageZeros(at::IntArrayRef sizes, at::ScalarType dtype);

// `tensor` in memory read through 2 MiB pages, for a CPU tensor that stays as long as the tensors
// loaded with it (a packed weight placed on the cpu). Under 2 MiB it is copied into a shared
// arena: 16 MiB MADV_HUGEPAGE mappings on a 2 MiB boundary, handed out in order, 256-byte
// aligned, each given back when the last tensor in it is freed. (HugePageZeros leaves those to
// ATen's allocator, and a small model's packed weights are all under 2 MiB: on 4 KiB pages a
// small-preset int4 decode step took 5.5-6.2 ms against 4.5-5.5 with the arenas,
// bench/analysis.md.) A tensor freed before its neighbours leaves its bytes unused until the
// whole arena goes: hence not HugePageZeros' default. Returned as it is: 2 MiB or more (give
// those HugePageZeros' own mappings), empty, strided, not on the CPU, already in huge-page
// memory, when no arena can be mapped, and always under PLACER_HUGE_PAGE_ARENAS=0 (measuring).
at::Tensor InHugePageArena(const at::Tensor& tensor);

// Whether `tensor`'s storage is in one of the mappings above, its own or an arena (for tests).
bool IsHugePageMapping(const at::Tensor& tensor);

}  // namespace placer::loader
