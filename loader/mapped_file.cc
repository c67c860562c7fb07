#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace placer::loader {
namespace {

// The live mappings, start -> end, for DropResidentPages.
std::mutex& MappingsMutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<std::uintptr_t, std::uintptr_t>& Mappings() {
  static std::map<std::uintptr_t, std::uintptr_t> mappings;
  return mappings;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(
    const std::string& path, std::uint64_t expected_size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot open: ", std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(path, ": cannot stat: ", std::strerror(error)));
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size != expected_size) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is ", size, " bytes but was ", expected_size,
                     " when its header was read (file changed while in use)"));
  }
  void* address = nullptr;
  if (size > 0) {
    // Read-only on purpose: a writable private mapping is charged against the
    // commit limit, so a shard larger than RAM + swap could not be mapped at
    // all, and offloading such models is the point. Writing into a view
    // therefore faults; weights are never written.
    address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": cannot mmap ", size, " bytes: ", std::strerror(error)));
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  if (address != nullptr) {
    const auto start = reinterpret_cast<std::uintptr_t>(address);
    std::lock_guard<std::mutex> lock(MappingsMutex());
    Mappings()[start] = start + size;
  }
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, static_cast<std::uint8_t*>(address), size));
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(MappingsMutex());
    Mappings().erase(reinterpret_cast<std::uintptr_t>(data_));
  }
  ::munmap(data_, size_);
}

bool MappedFile::DropResidentPages(const void* begin, std::uint64_t bytes) {
  const auto first = reinterpret_cast<std::uintptr_t>(begin);
  std::lock_guard<std::mutex> lock(MappingsMutex());
  auto it = Mappings().upper_bound(first);
  if (it == Mappings().begin()) return false;
  --it;
  const std::uintptr_t start = it->first, end = it->second;
  if (first < start || bytes > end - first) return false;
  // Whole pages, rounded outwards but kept inside the mapping (its start is page aligned).
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t from = first / page * page;
  const std::uintptr_t to = std::min(end, (first + bytes + page - 1) / page * page);
  if (to <= from) return true;
  return ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED) == 0;
}

}  // namespace placer::loader
