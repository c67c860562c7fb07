// /proc/self/smaps as tests read it: what the kernel says about the mapping holding an address.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace placer::loader {

// The line starting with `key` (e.g. "Rss:", "VmFlags:") in the smaps entry of the mapping that
// contains `address`; empty if no mapping contains it or its entry has no such line.
inline std::string SmapsLineAt(const void* address, const std::string& key) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= at && at < end;
      continue;
    }
    if (inside && line.rfind(key, 0) == 0) return line;
  }
  return "";
}

}  // namespace placer::loader
