#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placer::loader {

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
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, static_cast<std::uint8_t*>(address), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace placer::loader
