#include "loader/huge_page_tensor.h"

#include <sys/mman.h>

#include <cstdint>

namespace placer::loader {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

struct Mapping {
  void* start;
  size_t bytes;
};

void Unmap(void* context) {
  auto* mapping = static_cast<Mapping*>(context);
  ::munmap(mapping->start, mapping->bytes);
  delete mapping;
}

// `bytes` rounded up to whole 4 KiB pages, starting on a 2 MiB boundary: map 2 MiB more than
// needed and give back the unaligned head and the surplus tail.
Mapping* MapAligned(size_t bytes) {
  const size_t page = 4096;
  const size_t length = (bytes + page - 1) / page * page;
  void* raw = ::mmap(nullptr, length + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (aligned > base) ::munmap(raw, aligned - base);
  const uintptr_t end = base + length + kHugePageBytes;
  if (end > aligned + length) ::munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  void* start = reinterpret_cast<void*>(aligned);
  (void)::madvise(start, length, MADV_HUGEPAGE);  // a hint; failure leaves ordinary pages
  return new Mapping{start, length};
}

}  // namespace

at::Tensor HugePageZeros(at::IntArrayRef sizes, at::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  const size_t bytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  if (bytes < kHugePageBytes) return at::zeros(sizes, at::TensorOptions().dtype(dtype));
  Mapping* mapping = MapAligned(bytes);
  if (mapping == nullptr) return at::zeros(sizes, at::TensorOptions().dtype(dtype));
  // Anonymous mappings read as zeros until written: nothing to fill.
  at::DataPtr data(mapping->start, mapping, &Unmap, at::Device(at::kCPU));
  at::Storage storage(at::Storage::use_byte_size_t(), bytes, std::move(data),
                      /*allocator=*/nullptr, /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(dtype)).set_(storage, 0, sizes);
}

bool IsHugePageMapping(const at::Tensor& tensor) {
  return tensor.defined() && tensor.storage().data_ptr().get_deleter() == &Unmap;
}

}  // namespace placer::loader
