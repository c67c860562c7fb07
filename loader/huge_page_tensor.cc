#include "loader/huge_page_tensor.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

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

// InHugePageArena's arenas: the one being filled hands out its bytes in order; each is given
// back with its last tensor (a full one is never filled again), so no byte is handed out twice.
constexpr size_t kArenaBytes = size_t{16} << 20;
constexpr size_t kArenaAlignment = 256;  // whole cache lines, and any dtype's alignment

struct Arena {
  Mapping* mapping;
  size_t used = 0;   // handed out from the start
  int64_t live = 0;  // tensors in it
};

std::mutex& ArenaMutex() {
  static auto* mutex = new std::mutex();  // never destroyed: tensors may outlive statics
  return *mutex;
}

Arena*& FillingArena() {  // under ArenaMutex; when set, it holds at least one live tensor
  static Arena* arena = nullptr;
  return arena;
}

void ReleaseArenaBlock(void* context) {
  auto* arena = static_cast<Arena*>(context);
  std::lock_guard<std::mutex> lock(ArenaMutex());
  if (--arena->live > 0) return;
  if (FillingArena() == arena) FillingArena() = nullptr;
  Unmap(arena->mapping);
  delete arena;
}

bool ArenasOn() {
  static const bool on = [] {
    const char* value = std::getenv("PLACER_HUGE_PAGE_ARENAS");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return on;
}

// `bytes` (under kHugePageBytes) in the arena being filled; a null DataPtr when no arena can be
// mapped.
at::DataPtr ArenaBlock(size_t bytes) {
  const size_t rounded = (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  std::lock_guard<std::mutex> lock(ArenaMutex());
  Arena*& arena = FillingArena();
  // A full arena stays mapped for its tensors; the last of them gives it back.
  if (arena != nullptr && arena->used + rounded > arena->mapping->bytes) arena = nullptr;
  if (arena == nullptr) {
    Mapping* mapping = MapAligned(kArenaBytes);
    if (mapping == nullptr) return at::DataPtr();
    arena = new Arena{mapping};
  }
  void* start = static_cast<char*>(arena->mapping->start) + arena->used;
  arena->used += rounded;
  ++arena->live;
  return at::DataPtr(start, arena, &ReleaseArenaBlock, at::Device(at::kCPU));
}

at::Tensor OnStorage(at::DataPtr data, size_t bytes, at::IntArrayRef sizes, at::ScalarType dtype) {
  at::Storage storage(at::Storage::use_byte_size_t(), bytes, std::move(data),
                      /*allocator=*/nullptr, /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(dtype)).set_(storage, 0, sizes);
}

}  // namespace

at::Tensor InHugePageArena(const at::Tensor& tensor) {
  if (!ArenasOn() || !tensor.defined() || !tensor.device().is_cpu() ||
      tensor.layout() != at::kStrided || !tensor.is_contiguous() || IsHugePageMapping(tensor)) {
    return tensor;
  }
  const size_t bytes = tensor.nbytes();
  if (bytes == 0 || bytes >= kHugePageBytes) return tensor;
  at::DataPtr block = ArenaBlock(bytes);
  if (!block) return tensor;
  std::memcpy(block.get(), tensor.data_ptr(), bytes);
  return OnStorage(std::move(block), bytes, tensor.sizes(), tensor.scalar_type());
}

at::Tensor HugePageZeros(at::IntArrayRef sizes, at::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  const size_t bytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  if (bytes < kHugePageBytes) return at::zeros(sizes, at::TensorOptions().dtype(dtype));
  Mapping* mapping = MapAligned(bytes);
  if (mapping == nullptr) return at::zeros(sizes, at::TensorOptions().dtype(dtype));
  // Anonymous mappings read as zeros until written: nothing to fill.
  return OnStorage(at::DataPtr(mapping->start, mapping, &Unmap, at::Device(at::kCPU)), bytes,
                   sizes, dtype);
}

bool IsHugePageMapping(const at::Tensor& tensor) {
  if (!tensor.defined()) return false;
  const at::DeleterFnPtr deleter = tensor.storage().data_ptr().get_deleter();
  return deleter == &Unmap || deleter == &ReleaseArenaBlock;
}

}  // namespace placer::loader
