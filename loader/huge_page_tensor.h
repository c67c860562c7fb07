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

// Whether `tensor`'s storage is one of HugePageZeros' mappings (for tests).
bool IsHugePageMapping(const at::Tensor& tensor);

}  // namespace placer::loader
