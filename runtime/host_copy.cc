#include "runtime/host_copy.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace placer::runtime {
namespace {

// Below this, streaming stores do not pay for the fence and the unaligned ends.
constexpr size_t kStreamingMinBytes = 64 << 10;

__attribute__((target("avx"))) void StreamingCopy(char* destination, const char* source,
                                                  size_t bytes) {
  const size_t head = (32 - (reinterpret_cast<uintptr_t>(destination) & 31)) & 31;
  std::memcpy(destination, source, head);
  size_t i = head;
  for (; i + 128 <= bytes; i += 128) {
    const char* from = source + i;
    __m256i* to = reinterpret_cast<__m256i*>(destination + i);
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 96));
    _mm256_stream_si256(to, a);
    _mm256_stream_si256(to + 1, b);
    _mm256_stream_si256(to + 2, c);
    _mm256_stream_si256(to + 3, d);
  }
  // Streaming stores are weakly ordered: make them visible before the block is handed over.
  _mm_sfence();
  std::memcpy(destination + i, source + i, bytes - i);
}

}  // namespace

void CopyHostBytes(void* destination, const void* source, size_t bytes) {
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (!has_avx || bytes < kStreamingMinBytes) {
    std::memcpy(destination, source, bytes);
    return;
  }
  StreamingCopy(static_cast<char*>(destination), static_cast<const char*>(source), bytes);
}

}  // namespace placer::runtime
