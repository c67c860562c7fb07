#include "loader/file_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

absl::Status ErrnoError(const std::string& path, absl::string_view action) {
  const int error = errno;
  const std::string message =
      absl::StrCat(path, ": cannot ", action, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  return absl::UnavailableError(message);
}

}  // namespace

absl::StatusOr<std::uint64_t> FileSize(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return ErrnoError(path, "stat");
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  return static_cast<std::uint64_t>(info.st_size);
}

absl::StatusOr<std::int64_t> FileMtimeNs(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return ErrnoError(path, "stat");
  return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 +
         info.st_mtim.tv_nsec;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          std::uint64_t max_bytes) {
  PLACER_ASSIGN_OR_RETURN(std::uint64_t size, FileSize(path));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", size, " bytes exceeds the ", max_bytes, "-byte limit"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(path, "open");
  std::string contents(static_cast<std::size_t>(size), '\0');
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (static_cast<std::uint64_t>(in.gcount()) != size) {
    return absl::DataLossError(absl::StrCat(path, ": short read"));
  }
  return contents;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return ErrnoError(temporary, "create");
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) return ErrnoError(temporary, "write");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return ErrnoError(path, "rename into place");
  }
  return absl::OkStatus();
}

std::uint64_t Fnv1a64(absl::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace placer::loader
