#include "placement/device_inventory.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace placer::placement {
namespace {

absl::StatusOr<HostMemory> ReadHostMemory(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot read host memory figures: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<HostMemory> memory = ParseMemInfo(text.str());
  if (!memory.ok()) {
    return absl::Status(memory.status().code(),
                        absl::StrCat(path, ": ", memory.status().message()));
  }
  return memory;
}

}  // namespace

absl::StatusOr<HostMemory> ParseMemInfo(absl::string_view text) {
  std::optional<std::uint64_t> total_kb;
  std::optional<std::uint64_t> available_kb;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = line.substr(0, colon);
    if (key != "MemTotal" && key != "MemAvailable") continue;
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EndsWith(value, "kB")) {
      value = absl::StripAsciiWhitespace(value.substr(0, value.size() - 2));
    }
    std::uint64_t kb = 0;
    if (!absl::SimpleAtoi(value, &kb)) {
      return absl::InvalidArgumentError(
          absl::StrCat("field ", key, ": cannot read '", line, "'"));
    }
    (key == "MemTotal" ? total_kb : available_kb) = kb;
  }
  if (!available_kb) {
    return absl::InvalidArgumentError("no MemAvailable line (kernel older than 3.14?)");
  }
  HostMemory memory;
  memory.available_bytes = *available_kb * 1024;
  memory.total_bytes = total_kb ? *total_kb * 1024 : memory.available_bytes;
  return memory;
}

absl::StatusOr<DiskSpace> ProbeDiskSpace(const std::string& dir) {
  std::string path = dir.empty() ? "." : dir;
  struct statvfs info {};
  while (statvfs(path.c_str(), &info) != 0) {
    if (errno != ENOENT) {
      return absl::UnavailableError(absl::StrCat(
          "offload dir ", dir, ": statvfs(", path, "): ", std::strerror(errno)));
    }
    const std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) {
      path = ".";
    } else if (slash == 0) {
      path = "/";
    } else {
      path = path.substr(0, slash);
    }
  }
  DiskSpace space;
  space.total_bytes = static_cast<std::uint64_t>(info.f_blocks) * info.f_frsize;
  space.free_bytes = static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
  return space;
}

absl::StatusOr<std::vector<DeviceInfo>> ProbeDevices(const InventoryOptions& options) {
  std::vector<DeviceInfo> devices;
  const VirtualDevices* virtual_devices =
      options.virtual_devices ? &*options.virtual_devices : nullptr;

  if (virtual_devices != nullptr) {
    for (std::size_t i = 0; i < virtual_devices->gpu_bytes.size(); ++i) {
      const std::uint64_t bytes = virtual_devices->gpu_bytes[i];
      devices.push_back({Device::Cuda(static_cast<int>(i)),
                         "virtual GPU backed by host memory", bytes, bytes, true});
    }
  } else if (options.gpu_probe) {
    absl::StatusOr<std::vector<GpuMemoryInfo>> gpus = options.gpu_probe();
    if (!gpus.ok()) {
      return absl::Status(gpus.status().code(),
                          absl::StrCat("GPU probe failed: ", gpus.status().message()));
    }
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      const GpuMemoryInfo& gpu = (*gpus)[i];
      devices.push_back({Device::Cuda(static_cast<int>(i)), gpu.name, gpu.total_bytes,
                         gpu.free_bytes, false});
    }
  }

  if (virtual_devices != nullptr && virtual_devices->cpu_bytes) {
    const std::uint64_t bytes = *virtual_devices->cpu_bytes;
    devices.push_back({Device::Cpu(), "virtual host memory", bytes, bytes, true});
  } else {
    PLACER_ASSIGN_OR_RETURN(HostMemory host, ReadHostMemory(options.meminfo_path));
    devices.push_back({Device::Cpu(), "host memory (MemAvailable)", host.total_bytes,
                       host.available_bytes, false});
  }

  if (virtual_devices != nullptr && virtual_devices->disk_bytes) {
    const std::uint64_t bytes = *virtual_devices->disk_bytes;
    devices.push_back({Device::Disk(),
                       options.offload_dir.empty() ? "virtual disk"
                                                   : "virtual disk at " + options.offload_dir,
                       bytes, bytes, true});
  } else if (!options.offload_dir.empty()) {
    PLACER_ASSIGN_OR_RETURN(DiskSpace disk, ProbeDiskSpace(options.offload_dir));
    devices.push_back({Device::Disk(), "offload dir " + options.offload_dir,
                       disk.total_bytes, disk.free_bytes, false});
  }
  return devices;
}

}  // namespace placer::placement
