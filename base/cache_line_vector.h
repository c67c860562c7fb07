// CacheLineVector<T>: a std::vector whose data starts on a 64-byte cache line.
//
// Kernel scratch buffers (tile operands, arranged inputs, partial sums) are read 64 bytes at a
// time, tile rows and AVX-512 vectors alike. A plain std::vector starts wherever malloc puts it
// (glibc promises 16 bytes), and where that is not a line boundary every such read straddles two
// cache lines: the AMX prompt-chunk kernels' tile loops ran ~1.4x as long on the small preset's
// prefill (bench/analysis.md, "Scratch buffers on cache lines").
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace placer::base {

inline constexpr std::size_t kCacheLineBytes = 64;

// Promise: allocate() returns storage aligned to kCacheLineBytes (C++17 aligned new), so a
// vector's data() is too, whatever its size or element type; equal allocators are
// interchangeable.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    return static_cast<T*>(
        ::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete(p, std::align_val_t{kCacheLineBytes});
  }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept {
    return false;
  }
};

template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace placer::base
